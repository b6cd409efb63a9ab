"""python -m suite model: the α-β model's predictions, to prepare expected values before renting.

python -m suite model --alpha 5e-6 --beta 200e9 --cards 4 8 --sizes 4K 4M 1G
python -m suite model --cards 64 --grad-bytes 14G --step-time 1.2     # DP communication share
"""

from __future__ import annotations

import math

from suite import strict_json
from suite.commands import _numbers as numbers
from suite.commands import usage_error
from suite.costmodel import alphabeta as ab

UNITS = {"": 1, "B": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}


def parse_size(text: str) -> int:
    """'4K' → 4096, '1G' → 1073741824, '512' → 512 (binary units, as nccl-tests' -b/-e read them)."""
    t = text.strip().upper()
    t = t[:-2] if t.endswith("IB") else t[:-1] if t.endswith("B") else t
    number, unit = (t[:-1], t[-1]) if t and t[-1] in UNITS else (t, "")
    try:
        value = float(number) * UNITS[unit]
    except ValueError:
        raise ValueError(f"size {text!r} not understood: write e.g. 8, 4K, 4M, 1G") from None
    if not math.isfinite(value):  # nan, 1e400: no message has that size
        raise ValueError(f"size {text!r} is not a finite number of bytes")
    if value <= 0:
        raise ValueError(f"size {text!r} must be positive")
    return int(value)


def add_parser(sub) -> None:
    p = sub.add_parser(
        "model", help="ring vs tree all-reduce times and DP communication share from the α-β model"
    )
    p.add_argument(
        "--alpha", type=numbers.not_negative, default=5e-6, help="per-step latency α, seconds (default 5e-6)"
    )
    p.add_argument(
        "--beta", type=numbers.positive, default=200e9, help="link bandwidth β, bytes/s (default 200e9)"
    )
    p.add_argument("--cards", type=numbers.count, nargs="+", default=[2, 4, 8], help="ranks (default 2 4 8)")
    p.add_argument(
        "--sizes",
        nargs="+",
        default=["4K", "64K", "1M", "4M", "64M", "1G"],
        help="message sizes, binary units (default 4K 64K 1M 4M 64M 1G)",
    )
    p.add_argument("--grad-bytes", help="gradient bytes per step for the DP share (e.g. 14G)")
    p.add_argument(
        "--step-time", type=numbers.positive, help="compute time of one step, seconds, for the DP share"
    )
    p.add_argument("--json", action="store_true", help="print the rows as a JSON list of objects")
    p.set_defaults(func=main)


def table_rows(alpha: float, beta: float, cards: list[int], sizes: list[int]) -> list[dict]:
    rows = []
    for n in cards:
        for size in sizes:
            ring = ab.ring_allreduce_s(size, n, alpha, beta) * 1e6
            tree = ab.tree_allreduce_s(size, n, alpha, beta) * 1e6
            rows.append(
                {
                    "cards": n,
                    "bytes": size,
                    "ring_us": round(ring, 3),
                    "tree_us": round(tree, 3),
                    "faster": "tree" if tree < ring else "ring",
                }
            )
    return rows


def main(args) -> int:
    if args.alpha < 0 or args.beta <= 0 or any(n < 1 for n in args.cards):
        return usage_error("--alpha must be ≥ 0, --beta > 0 and --cards ≥ 1")
    try:
        sizes = [parse_size(s) for s in args.sizes]
        grad = parse_size(args.grad_bytes) if args.grad_bytes else None
    except ValueError as e:
        return usage_error(str(e))
    if (grad is None) != (args.step_time is None):
        return usage_error("the DP share needs both --grad-bytes and --step-time")
    rows = table_rows(args.alpha, args.beta, args.cards, sizes)
    if args.json:
        print(strict_json.dumps(rows, indent=2))
        return 0
    print(f"α = {args.alpha * 1e6:g} µs, β = {args.beta / 1e9:g} GB/s")
    print(f"{'cards':>5} {'size':>12} {'ring µs':>12} {'tree µs':>12}  faster")
    for r in rows:
        print(f"{r['cards']:>5} {r['bytes']:>12} {r['ring_us']:>12.1f} {r['tree_us']:>12.1f}  {r['faster']}")
    for n in args.cards:
        cross = ab.crossover_bytes(n, args.alpha, args.beta)
        where = f"{cross:,.0f} bytes (tree faster below)" if cross else "none (ring never slower)"
        print(f"crossover at {n} cards: {where}")
    if grad is not None:
        print(f"\ndata parallel, {grad:,} gradient bytes, {args.step_time} s compute per step:")
        for n in args.cards:
            comm = ab.dp_step_comm_s(grad, n, args.alpha, args.beta)
            share = ab.dp_comm_share(grad, n, args.step_time, args.alpha, args.beta)
            print(
                f"{n:>5} cards: all-reduce {comm * 1e3:9.1f} ms, {share * 100:5.1f}% of an unoverlapped step"
            )
    return 0
