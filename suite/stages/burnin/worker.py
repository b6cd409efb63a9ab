"""The burn-in's workers: every rank runs the same seeded GEMM chain for the tier's time; bits compared every
repeat.

    ctx.torchrun("suite.stages.burnin.worker", ["--n", "8192", "--links", "4", "--seconds", "600", ...],
    tag="burnin")

Per dtype (bf16, then fp32, each for its share of `--seconds`), every repeat: the chain from the same inputs
(suite/stages/burnin/chain.py), its digest gathered from every rank (which also keeps the ranks in step: all
run the same number of repeats, rank 0's clock decides when to stop). A rank whose digest is not the
majority's gets the majority's result broadcast from its lowest rank and names the first differing element
("sdc_ranks"); every rank also compares each repeat with its own reference result, the first that agreed with
the majority ("sdc_repeats": a GPU that drifts over time, or the only GPU of a one-card box). Timed: the chain
alone (CUDA events on GPUs, the wall clock on CPU), summed per rank into its sustained TFLOP/s, and per
`--window-s` of the run into rows with `t` (seconds since the dtype's phase began): the figure's TFLOP/s over
time.

`--flip RANK:REPEAT:DTYPE:INDEX:BIT` flips one bit of one element of RANK's result at REPEAT (the drill
proving the comparison names the GPU, the repeat and the element); `--slow-rank R` makes rank R run its chain
`--slow-factor` times a repeat (the drill proving the peer rule).
"""

from __future__ import annotations

import argparse
import time
from collections import Counter

import torch
import torch.distributed as dist

from suite.results import Row
from suite.stages.burnin import chain
from suite.stages.burnin.links import links_phase
from suite.workloads.worker import worker_session

STAGE = "burnin"
MAX_REPORTS = 4
"""Mismatching repeats reported in full per rank and dtype (each costs a broadcast of the result); later ones
are counted only: a GPU that computes wrong every time is named by its first, and must not stretch the
stage."""


class ChainTimer:
    """Seconds of the chain alone: CUDA events around it on a GPU, the wall clock on CPU."""

    def __init__(self, device: torch.device):
        self.device = device

    def __call__(self, fn):
        if self.device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            out = fn()
            end.record()
            end.synchronize()
            return out, start.elapsed_time(end) / 1e3
        t0 = time.perf_counter()
        out = fn()
        return out, time.perf_counter() - t0


def majority(digests: list[tuple[int, int]]) -> tuple[set[int], bool]:
    """The ranks holding the most common digest, and whether they are a strict majority (a tie names no
    one)."""
    counts = Counter(digests)
    (top, count), *rest = counts.most_common()
    strict = not rest or rest[0][1] < count
    return {r for r, d in enumerate(digests) if d == top}, strict


def parse_flip(spec: str) -> tuple[int, int, str, int, int] | None:
    if not spec:
        return None
    rank, repeat, dtype, index, bit = spec.split(":")
    return int(rank), int(repeat), dtype, int(index), int(bit)


def burn(w, dtype_name: str, args, seconds: float, flip) -> list[Row]:
    """One dtype's phase: repeats until rank 0's clock passes `seconds`; its rows for this rank."""
    dtype = getattr(torch, dtype_name)
    a, bs = chain.chain_inputs(args.n, args.links, args.seed, dtype, w.device)
    timer = ChainTimer(w.device)
    factor = args.slow_factor if w.rank == args.slow_rank else 1
    width = 8 * a.element_size()
    base = dict(stage=STAGE, dtype=dtype_name, rank=w.rank, world=w.world, count=args.n, source="torch")
    rows: list[Row] = []
    reference: torch.Tensor | None = None
    reference_digest: tuple[int, int] | None = None
    busy_s, repeat, broadcasts, repeat_reports = 0.0, 0, 0, 0
    mismatched = {"sdc_ranks": 0, "sdc_repeats": 0}
    window_start, window_busy, window_repeats, window = 0.0, 0.0, 0, 0
    phase_t0 = time.monotonic()

    def close_window(now: float) -> None:
        nonlocal window_start, window_busy, window_repeats, window
        if window_repeats:
            rows.append(
                Row(
                    **base,
                    case="window",
                    metric="tflops",
                    unit="TFLOP/s",
                    repeat=window,
                    t=round(now, 3),
                    value=chain.chain_flops(args.n, args.links) * window_repeats / window_busy / 1e12,
                )
            )
        window, window_start, window_busy, window_repeats = window + 1, now, 0.0, 0

    while True:
        out, spent = None, 0.0
        for _ in range(factor):
            out, took = timer(lambda: chain.run_chain(a, bs))
            spent += took
        busy_s += spent
        window_busy += spent
        window_repeats += 1
        if flip and flip[0] == w.rank and flip[1] == repeat and flip[2] == dtype_name:
            chain.flip_bit(out, flip[3], flip[4])
        elapsed = time.monotonic() - phase_t0
        mine = chain.digest(out)
        payload = torch.cat([mine, torch.tensor([int(elapsed * 1e6)], dtype=torch.int64, device=mine.device)])
        gathered = [torch.empty_like(payload) for _ in range(w.world)]
        dist.all_gather(gathered, payload)
        digests = [(int(g[0]), int(g[1])) for g in gathered]
        keep, strict = majority(digests)
        agreed = w.rank in keep or not strict
        # a reference taken this repeat is not compared with this repeat
        had_reference = reference is not None
        if len(keep) < w.world and strict and broadcasts < MAX_REPORTS:
            # someone differs from the majority: every rank sees it in the same digests, so all enter the
            # broadcast
            broadcasts += 1
            source = min(keep)
            theirs = out.clone() if w.rank == source else torch.empty_like(out)
            dist.broadcast(theirs, src=source)
            if w.rank not in keep:
                diff = chain.first_difference(out, theirs)
                rows.append(
                    Row(
                        **base,
                        case="sdc_ranks",
                        metric="first_difference",
                        unit="index",
                        repeat=repeat,
                        value=float(diff[0]) if diff else float("nan"),
                        text=(
                            f"rank {w.rank} repeat {repeat}: {chain.describe(diff, width)} of rank {source} "
                            f"(the majority: {len(keep)} of {w.world} ranks)"
                        )
                        if diff
                        else f"rank {w.rank} repeat {repeat}: digest differs, bits equal (digest fault)",
                    )
                )
                # this rank's reference is the majority's result, never its own wrong one
                if reference is None:
                    reference, reference_digest = theirs, digests[source]
        if strict and w.rank not in keep:
            mismatched["sdc_ranks"] += 1
        if reference is None and agreed:
            reference, reference_digest = out.clone(), digests[w.rank]
        elif had_reference and digests[w.rank] != reference_digest:
            mismatched["sdc_repeats"] += 1
            if repeat_reports < MAX_REPORTS:
                repeat_reports += 1
                diff = chain.first_difference(out, reference)
                rows.append(
                    Row(
                        **base,
                        case="sdc_repeats",
                        metric="first_difference",
                        unit="index",
                        repeat=repeat,
                        value=float(diff[0]) if diff else float("nan"),
                        text=(
                            f"rank {w.rank} repeat {repeat}: {chain.describe(diff, width)} of its own "
                            "reference repeat"
                        )
                        if diff
                        else f"rank {w.rank} repeat {repeat}: digest only",
                    )
                )
        repeat += 1
        rank0_elapsed = int(gathered[0][2]) / 1e6
        if rank0_elapsed - window_start >= args.window_s:
            close_window(rank0_elapsed)
        if rank0_elapsed >= seconds:
            close_window(rank0_elapsed)
            break
        w.progress(
            f"burn-in {dtype_name}: repeat {repeat}",
            done=min(int(rank0_elapsed), int(seconds)),
            of=max(1, int(seconds)),
        )
    flops = chain.chain_flops(args.n, args.links) * repeat
    rows += [
        Row(**base, case="gemm", metric="tflops", unit="TFLOP/s", value=flops / busy_s / 1e12),
        Row(**base, case="gemm", metric="repeats", unit="count", value=float(repeat)),
        Row(**base, case="gemm", metric="busy_s", unit="s", value=busy_s),
        Row(
            **base,
            case="sdc_ranks",
            metric="mismatched_repeats",
            unit="count",
            value=float(mismatched["sdc_ranks"]),
        ),
        Row(
            **base,
            case="sdc_repeats",
            metric="mismatched_repeats",
            unit="count",
            value=float(mismatched["sdc_repeats"]),
        ),
    ]
    return rows


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--n", type=int, required=True, help="side of the square matrices")
    p.add_argument("--links", type=int, required=True, help="GEMMs in the chain")
    p.add_argument("--seconds", type=float, required=True, help="the whole burn-in, every dtype together")
    p.add_argument("--dtypes", default="bfloat16,float32")
    p.add_argument("--fp32-share", type=float, default=0.25, help="share of --seconds given to float32")
    p.add_argument("--seed", type=int, default=20240611)
    p.add_argument("--window-s", type=float, default=10.0)
    p.add_argument("--flip", default="", help="RANK:REPEAT:DTYPE:INDEX:BIT, an injected bit flip")
    p.add_argument("--slow-rank", type=int, default=-1)
    p.add_argument("--slow-factor", type=int, default=3)
    p.add_argument(
        "--hbm-bytes", type=int, default=0, help="HBM copy size; 0 skips the memory and host-link phase"
    )
    p.add_argument("--copy-bytes", type=int, default=0)
    p.add_argument("--copy-iters", type=int, default=4)
    args = p.parse_args()
    settings = chain.deterministic_settings()
    flip = parse_flip(args.flip)
    dtypes = [d for d in args.dtypes.split(",") if d]
    with worker_session() as w:
        on_gpu = w.device.type == "cuda"
        name = torch.cuda.get_device_name(w.device) if on_gpu else "cpu"
        bus = getattr(torch.cuda.get_device_properties(w.device), "pci_bus_id", None) if on_gpu else None
        rows = [
            Row(
                stage=STAGE,
                case="device",
                metric="device",
                value=float("nan"),
                unit="",
                rank=w.rank,
                world=w.world,
                source="torch",
                text=f"{name}" + (f" (PCI bus {bus:02x})" if bus is not None else ""),
            ),
            Row(
                stage=STAGE,
                case="device",
                metric="determinism",
                value=float("nan"),
                unit="",
                rank=w.rank,
                world=w.world,
                source="torch",
                text=settings,
            ),
        ]
        w.emit(rows)
        # before the chains: links measured cool, the chain then heats the GPU for the tier's time
        if args.hbm_bytes:
            w.emit(
                links_phase(w, hbm_bytes=args.hbm_bytes, copy_bytes=args.copy_bytes, iters=args.copy_iters)
            )
        for dtype_name in dtypes:
            share = (
                args.fp32_share
                if dtype_name == "float32" and len(dtypes) > 1
                else (1.0 - args.fp32_share if len(dtypes) > 1 else 1.0)
            )
            w.emit(burn(w, dtype_name, args, args.seconds * share, flip))


if __name__ == "__main__":
    main()
