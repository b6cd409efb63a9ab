"""Hand-written ring and binomial-tree all-reduce over isend/irecv, byte-counted, checked against
dist.all_reduce.

    ctx.torchrun("suite.stages.crossover.hand_allreduce", ["--sizes", "8,64,4096", "--warmup", "2", "--iters",
    "5"])

Ring (reduce-scatter then all-gather): 2(n−1) steps, each rank sends chunk (r−s) mod n to r+1 and
receives from r−1 in one batch_isend_irecv (send and receive together, so no rank waits for its
neighbour to post first). α-β time 2(n−1)(α + S/(nβ)); bytes per rank 2(n−1)·S/n.

Tree: a binomial tree rooted at rank 0 — reduce up (rank r sends its partial sum to r − lowbit(r)
after adding what its children r + 2^k sent), then broadcast down the same edges. ⌈log₂n⌉ rounds
each way, each moving the whole buffer: α-β time 2⌈log₂n⌉(α + S/β), the model's tree time. Works for
any n (a child r + 2^k that would be ≥ n simply does not exist). Bytes per rank: S × (children + 1
for the parent); 2(n−1)·S over all ranks.

Every size: each rank fills its buffer with integers (exact in float sums, so any order of addition
gives the same bits), runs ring, tree and dist.all_reduce on copies, counts elements that differ
from dist.all_reduce, then times each algorithm (warm-up, timed iterations, device synchronised).
Rows (rank 0 for the group, every rank for its own bytes): time_us, algbw, busbw, wrong,
max_abs_diff; bytes_sent, bytes_received per rank.

Deliberate mistakes (`--mistakes`, for the tests: the check must catch each), real bugs of a hand-written
all-reduce that run without an error and keep every rank's sends and receives paired:
  ring_chunk_offset   the reduce-scatter adds each received chunk into the slot it just sent (index off by
                      one)
  ring_missing_step   the reduce-scatter stops one step short (n−2 steps): the all-gather spreads partial sums
  tree_overwrite      a parent receives its child's partial sum over its own buffer instead of adding it
Each is run untimed after the correct algorithms; rows case `mistake.<name>`: wrong, max_abs_diff.
"""

from __future__ import annotations

import argparse

import torch
import torch.distributed as dist

from suite.costmodel.alphabeta import algbw_GBps, binomial_children, busbw_GBps
from suite.results import Row
from suite.workloads.collective_sweep import group_stats, timed
from suite.workloads.worker import Worker, worker_session
from suite.workloads.worker_cli import mistakes_from


class ByteCounter:
    """Bytes this rank handed to isend and asked of irecv."""

    def __init__(self) -> None:
        self.sent = 0
        self.received = 0

    def ops(self, send: torch.Tensor | None, dst: int, recv: torch.Tensor | None, src: int) -> list:
        """The P2P ops of one exchange; empty chunks (count < n) are not sent at all, on both sides alike."""
        ops = []
        if send is not None and send.numel():
            ops.append(dist.P2POp(dist.isend, send, dst))
            self.sent += send.numel() * send.element_size()
        if recv is not None and recv.numel():
            ops.append(dist.P2POp(dist.irecv, recv, src))
            self.received += recv.numel() * recv.element_size()
        return ops


def exchange(
    counter: ByteCounter, send: torch.Tensor | None, dst: int, recv: torch.Tensor | None, src: int
) -> None:
    ops = counter.ops(send, dst, recv, src)
    if ops:
        for request in dist.batch_isend_irecv(ops):
            request.wait()


MISTAKES = {"ring_chunk_offset": "ring", "ring_missing_step": "ring", "tree_overwrite": "tree"}


def ring_allreduce(x: torch.Tensor, counter: ByteCounter, mistake: str | None = None) -> torch.Tensor:
    """In place: reduce-scatter around the ring, then all-gather; n−1 + n−1 steps of one chunk."""
    n, r = dist.get_world_size(), dist.get_rank()
    if n == 1:
        return x
    chunks = list(torch.tensor_split(x, n))
    right, left = (r + 1) % n, (r - 1) % n
    scratch = torch.empty_like(chunks[0])
    steps = n - 2 if mistake == "ring_missing_step" else n - 1
    for s in range(steps):  # reduce-scatter: after it, rank r owns the full sum of chunk (r+1) mod n
        send_i, recv_i = (r - s) % n, (r - s - 1) % n
        buf = scratch[: chunks[recv_i].numel()]
        exchange(counter, chunks[send_i], right, buf, left)
        if mistake == "ring_chunk_offset":  # uneven chunks differ by one element: add what overlaps
            m = min(buf.numel(), chunks[send_i].numel())
            chunks[send_i][:m].add_(buf[:m])
        else:
            chunks[recv_i].add_(buf)
    for s in range(n - 1):  # all-gather: pass the finished chunks around
        send_i, recv_i = (r + 1 - s) % n, (r - s) % n
        exchange(counter, chunks[send_i], right, chunks[recv_i], left)
    return x


def tree_allreduce(x: torch.Tensor, counter: ByteCounter, mistake: str | None = None) -> torch.Tensor:
    """In place: binomial-tree reduce to rank 0, then broadcast back down the same tree."""
    n, r = dist.get_world_size(), dist.get_rank()
    if n == 1:
        return x
    children = binomial_children(r, n)
    parent = r - (r & -r) if r else None
    scratch = torch.empty_like(x)
    for child in children:  # smallest subtree first: it finishes its own reduce soonest
        if mistake == "tree_overwrite":
            exchange(counter, None, 0, x, child)
            continue
        exchange(counter, None, 0, scratch, child)
        x.add_(scratch)
    if parent is not None:
        exchange(counter, x, parent, None, 0)
        exchange(counter, None, 0, x, parent)
    for child in reversed(children):  # largest subtree first: it has the most forwarding left to do
        exchange(counter, x, child, None, 0)
    return x


ALGORITHMS = {"ring": ring_allreduce, "tree": tree_allreduce}


def fill(count: int, rank: int, dtype: torch.dtype, device: torch.device, seed: int) -> torch.Tensor:
    """Integers in [−8, 8) as floats, different on every rank: float sums of them are exact in any order."""
    g = torch.Generator().manual_seed(seed * 1000 + rank)
    return torch.randint(-8, 8, (count,), generator=g).to(dtype=dtype, device=device)


def difference(out: torch.Tensor, reference: torch.Tensor) -> tuple[float, float]:
    """(elements of `out` that differ from `reference`, the largest difference)."""
    wrong = float((out != reference).sum().item())
    # the difference tensor is another buffer-sized allocation: only made when something is wrong
    return wrong, float((out - reference).abs().max().item()) if wrong else 0.0


def run_size(w: Worker, size: int, args, dtype: torch.dtype) -> list[Row]:
    elem = torch.tensor([], dtype=dtype).element_size()
    count = size // elem
    size = count * elem
    data = fill(count, w.rank, dtype, w.device, args.seed)
    reference = data.clone()
    dist.all_reduce(reference)
    rows: list[Row] = []
    base = dict(
        stage=args.stage,
        size_bytes=size,
        count=count,
        dtype=args.dtype,
        redop="sum",
        root=-1,
        placement="ip",
        source="hand",
        world=w.world,
    )
    for algo in args.algorithms:
        fn = ALGORITHMS[algo]
        counter = ByteCounter()
        out = fn(data.clone(), counter)
        # for tests: the result itself, to compare with a single-process sum of the inputs
        if args.save_results:
            torch.save(out.cpu(), w.out_dir / f"result.{algo}.{size}.rank{w.rank}.pt")
        wrong, worst = difference(out, reference)
        del out
        rows += [
            Row(
                case=f"{algo}.bytes",
                metric="bytes_sent",
                value=counter.sent,
                unit="bytes",
                algo=algo,
                rank=w.rank,
                **base,
            ),
            Row(
                case=f"{algo}.bytes",
                metric="bytes_received",
                value=counter.received,
                unit="bytes",
                algo=algo,
                rank=w.rank,
                **base,
            ),
        ]
        work = torch.zeros_like(data)  # zeros: a sum repeated over the timed iterations stays finite
        seconds, wrong = group_stats(
            w, timed(w, lambda: fn(work, ByteCounter()), args.warmup, args.iters), wrong
        )
        worst = group_stats(w, worst, 0.0)[0]
        if w.rank == 0:
            rows += [
                Row(case=algo, metric="time_us", value=seconds * 1e6, unit="us", algo=algo, **base),
                Row(
                    case=algo, metric="algbw", value=algbw_GBps(size, seconds), unit="GB/s", algo=algo, **base
                ),
                Row(
                    case=algo,
                    metric="busbw",
                    value=busbw_GBps("all_reduce", size, seconds, w.world),
                    unit="GB/s",
                    algo=algo,
                    **base,
                ),
                Row(case=algo, metric="wrong", value=wrong, unit="count", algo=algo, **base),
                Row(case=algo, metric="max_abs_diff", value=worst, unit="ratio", algo=algo, **base),
            ]
    for mistake in args.mistakes:  # untimed: only whether the comparison with dist.all_reduce sees it
        out = ALGORITHMS[MISTAKES[mistake]](data.clone(), ByteCounter(), mistake)
        wrong, worst = difference(out, reference)
        del out
        # the largest difference on any rank, the wrong elements of all
        worst, wrong = group_stats(w, worst, wrong)
        if w.rank == 0:
            rows += [
                Row(
                    case=f"mistake.{mistake}",
                    metric="wrong",
                    value=wrong,
                    unit="count",
                    algo=MISTAKES[mistake],
                    **base,
                ),
                Row(
                    case=f"mistake.{mistake}",
                    metric="max_abs_diff",
                    value=worst,
                    unit="ratio",
                    algo=MISTAKES[mistake],
                    **base,
                ),
            ]
    if args.library:  # dist.all_reduce itself, timed the same way, for the same curve
        work = torch.zeros_like(data)
        seconds, _ = group_stats(w, timed(w, lambda: dist.all_reduce(work), args.warmup, args.iters), 0.0)
        if w.rank == 0:
            lib = {**base, "source": "torch"}
            rows += [
                Row(case="library", metric="time_us", value=seconds * 1e6, unit="us", algo="library", **lib),
                Row(
                    case="library",
                    metric="busbw",
                    value=busbw_GBps("all_reduce", size, seconds, w.world),
                    unit="GB/s",
                    algo="library",
                    **lib,
                ),
            ]
    return rows


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", required=True, help="comma-separated message sizes, bytes")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--iters", type=int, default=5)
    p.add_argument("--dtype", default="float32")
    p.add_argument("--algorithms", default="ring,tree")
    p.add_argument("--library", action="store_true", help="also time dist.all_reduce at every size")
    p.add_argument("--stage", default="crossover", help="stage name the rows carry")
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument(
        "--save-results", action="store_true", help="save every rank's ring/tree result next to its rows"
    )
    p.add_argument(
        "--mistakes",
        default="",
        help=f"comma-separated deliberate mistakes to check as well (tests): {', '.join(MISTAKES)}",
    )
    args = p.parse_args(argv)
    args.sizes = [int(s) for s in args.sizes.split(",") if s]
    args.algorithms = [a for a in args.algorithms.split(",") if a]
    unknown = [a for a in args.algorithms if a not in ALGORITHMS]
    if unknown:
        p.error(f"unknown algorithm(s) {unknown}: choose from {sorted(ALGORITHMS)}")
    args.mistakes = mistakes_from(args)
    unknown = [m for m in args.mistakes if m not in MISTAKES]
    if unknown:
        p.error(f"unknown mistake(s) {unknown}: choose from {', '.join(MISTAKES)}")
    return args


def main(argv=None) -> None:
    args = parse_args(argv)
    dtype = getattr(torch, args.dtype)
    with worker_session() as w:
        for i, size in enumerate(args.sizes):
            w.progress(f"hand ring/tree {size} B", done=i, of=len(args.sizes))
            w.emit(run_size(w, size, args, dtype))
        w.progress("hand ring/tree done", done=len(args.sizes), of=len(args.sizes))


if __name__ == "__main__":
    main()
