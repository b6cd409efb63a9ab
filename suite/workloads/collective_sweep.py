"""The torch.distributed collective sweep, with nccl-tests' columns, checking and timing.

    ctx.torchrun("suite.workloads.collective_sweep",
                 ["--sizes", "8,128,2048", "--collectives", "all_reduce,all_gather", "--warmup", "2",
                 "--iters", "5"])

One small harness (this module) owns the sweep, the warm-up, the timing and the check; each
collective is a `Collective` filling the same slots as an nccl-tests test file: its byte count, its
data, its expected result, its bus-bandwidth factor (suite.costmodel.alphabeta.busbw_factor) and the call.

Sizes follow nccl-tests: `size` is the whole buffer S (for all_gather the gathered output, for
reduce_scatter the scattered input, for all_to_all one rank's send buffer) and `count` what
nccl-tests prints (elements per rank for all_gather/reduce_scatter, per peer for all_to_all). A size
too small to give every rank one element is skipped, as a count of zero measures nothing.

Checking: every rank contributes a known pattern — small integers (rank + 1 + (i mod 8), so any
summation order gives the same bits) — and after one call the result is compared elementwise with
the value it must have; the number of wrong elements over all ranks is the `wrong` column. Then
warm-up and timed iterations run on zeroed buffers (an in-place sum repeated 100 times would
overflow), the device synchronised before the clock is read; time is the slowest rank's mean.

Memory: the expected result is never materialised — each chunk of the result is compared slice by
slice (CHECK_SLICE elements) with `base + scale × pattern` — so a case holds only its own buffers:
S for all_reduce and broadcast, S + S/n for all_gather and reduce_scatter out of place, 2S for
all_to_all and send/recv (`Collective.peak_bytes`). On a GPU every rank reads its free memory
(torch.cuda.mem_get_info) before the sweep; the smallest, less a reserve for NCCL and the CUDA
context, times FREE_SHARE, is the budget, and a case needing more is not run: a `dropped` row says
so, with the bytes it needed and the budget (an RTX 4090's 24 GB cannot hold an 8 GiB all_to_all).

torch has no out-of-place all_reduce or broadcast: they are in-place (`ip`) only; all_gather and
reduce_scatter run both (in-place: the input is the rank's own chunk of the output, which NCCL
detects as in-place); all_to_all and send/recv are out-of-place only.
"""

from __future__ import annotations

import abc
import argparse
import time
from dataclasses import dataclass
from typing import Callable

import torch
import torch.distributed as dist

from suite.costmodel.alphabeta import algbw_GBps, busbw_factor
from suite.results import Row
from suite.workloads import probe
from suite.workloads.timed_sweep import run_steps
from suite.workloads.worker import Worker, worker_session
from suite.workloads.worker_cli import mistakes_from

# torch 2.13 prefers the *_single names (the *_tensor ones warn); older torch has only *_tensor.
all_gather_single = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
reduce_scatter_single = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor


def pattern(count: int, offset: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """Element i = (offset + i) mod 8, built from one period (no count-long index tensor: 8 GB buffers)."""
    period = ((torch.arange(8, device=device) + offset) % 8).to(dtype)
    out = torch.empty(count, dtype=dtype, device=device)
    full = count // 8 * 8
    if full:
        out[:full].view(-1, 8).copy_(period.expand(full // 8, 8))
    if count > full:
        out[full:].copy_(period[: count - full])
    return out


CHECK_SLICE = 1 << 24
"""Elements compared at once when checking a result (64 MiB of float32 of expected values, at most)."""
FREE_SHARE = 0.8
"""Share of the smallest rank's free device memory (after RESERVE_BYTES) one case may hold."""
RESERVE_BYTES = 1 << 30
"""Device memory left aside for NCCL's own buffers, the CUDA context's growth and the allocator's slack."""


@dataclass(frozen=True)
class Expected:
    """Chunk j of a result holds base + scale × pattern(offset …): the value every element must have."""

    base: int
    scale: int = 1
    offset: int = 0


def count_wrong(out: torch.Tensor, chunk_count: int, expected: Callable[[int], Expected]) -> int:
    """Elements of `out` (chunks of chunk_count) differing from `expected(j)`, compared CHECK_SLICE at a
    time."""
    wrong = 0
    for j in range(out.numel() // chunk_count if chunk_count else 0):
        e = expected(j)
        chunk = out[j * chunk_count : (j + 1) * chunk_count]
        for start in range(0, chunk_count, CHECK_SLICE):
            part = chunk[start : start + CHECK_SLICE]
            want = pattern(part.numel(), e.offset + start, out.dtype, out.device).mul_(e.scale).add_(e.base)
            wrong += int((part != want).sum().item())
    return wrong


@dataclass
class Case:
    """One collective at one size and placement, ready to run: `op()` runs it, `check()` counts wrong
    elements."""

    op: Callable[[], None]
    check: Callable[[], int]
    buffers: list[torch.Tensor]
    """Every buffer the case uses, the result first."""


def filled(count: int, base: int, dtype, device, offset: int = 0) -> torch.Tensor:
    """base + pattern, built in place (no second buffer of the same size)."""
    return pattern(count, offset, dtype, device).add_(base)


class Collective(abc.ABC):
    """An nccl-tests test file's slots: name, counts, data and expected value, the call."""

    name = ""
    redop = "sum"
    root = -1
    placements: tuple[str, ...] = ("oop",)
    per_rank_chunks = True  # S is split into n chunks (all_gather, reduce_scatter, all_to_all)

    def peak_bytes(self, nbytes: int, n: int, placement: str) -> int:
        """Device bytes this case holds at once for a buffer of S = nbytes (its own buffers; see the module
        doc)."""
        if self.per_rank_chunks and placement == "oop" and self.name != "all_to_all":
            return nbytes + nbytes // n  # the whole buffer and one rank's chunk
        return nbytes * (2 if self.name in ("all_to_all", "sendrecv") else 1)

    def counts(self, size: int, n: int, elem: int) -> tuple[int, int]:
        """(count as nccl-tests prints it, S in bytes) for a requested size."""
        if self.per_rank_chunks:
            chunk = size // (n * elem)
            return chunk, chunk * n * elem
        count = size // elem
        return count, count * elem

    @abc.abstractmethod
    def build(self, count: int, rank: int, n: int, dtype, device, placement: str) -> Case:
        """Buffers filled with this rank's pattern, the call, and the check against the expected result."""


class AllReduce(Collective):
    name, placements, per_rank_chunks = "all_reduce", ("ip",), False

    def build(self, count, rank, n, dtype, device, placement):
        buf = filled(count, rank + 1, dtype, device)
        summed = Expected(n * (n + 1) // 2, n)  # Σ(r+1) + n·p
        return Case(lambda: dist.all_reduce(buf), lambda: count_wrong(buf, count, lambda j: summed), [buf])


class AllGather(Collective):
    name, redop, placements = "all_gather", "none", ("oop", "ip")

    def build(self, count, rank, n, dtype, device, placement):
        out = torch.zeros(count * n, dtype=dtype, device=device)
        if placement == "ip":
            inp = out[rank * count : (rank + 1) * count]
            inp.copy_(filled(count, rank + 1, dtype, device))
        else:
            inp = filled(count, rank + 1, dtype, device)
        return Case(
            lambda: all_gather_single(out, inp),
            lambda: count_wrong(out, count, lambda j: Expected(j + 1)),
            [out, inp],
        )


class ReduceScatter(Collective):
    name, placements = "reduce_scatter", ("oop", "ip")

    def build(self, count, rank, n, dtype, device, placement):
        inp = filled(count * n, rank + 1, dtype, device)
        out = (
            inp[rank * count : (rank + 1) * count]
            if placement == "ip"
            else torch.zeros(count, dtype=dtype, device=device)
        )
        mine = Expected(n * (n + 1) // 2, n, rank * count)
        return Case(
            lambda: reduce_scatter_single(out, inp),
            lambda: count_wrong(out, count, lambda j: mine),
            [out, inp],
        )


class AllToAll(Collective):
    name, redop = "all_to_all", "none"

    def build(self, count, rank, n, dtype, device, placement):
        # Rank r's chunk for peer j holds r + 1 + j + p; rank r then holds, from each j, j + 1 + r + p.
        inp = torch.empty(count * n, dtype=dtype, device=device)
        for j in range(n):
            inp[j * count : (j + 1) * count].copy_(filled(count, rank + 1 + j, dtype, device))
        out = torch.zeros_like(inp)
        return Case(
            lambda: dist.all_to_all_single(out, inp),
            lambda: count_wrong(out, count, lambda j: Expected(j + 1 + rank)),
            [out, inp],
        )


class Broadcast(Collective):
    name, redop, root, placements, per_rank_chunks = "broadcast", "none", 0, ("ip",), False

    def build(self, count, rank, n, dtype, device, placement):
        buf = (
            filled(count, 1, dtype, device)
            if rank == self.root
            else torch.zeros(count, dtype=dtype, device=device)
        )
        return Case(
            lambda: dist.broadcast(buf, src=self.root),
            lambda: count_wrong(buf, count, lambda j: Expected(1)),
            [buf],
        )


class SendRecv(Collective):
    """nccl-tests' sendrecv: every rank sends to rank+1 and receives from rank−1 (a ring shift)."""

    name, redop, per_rank_chunks = "sendrecv", "none", False

    def build(self, count, rank, n, dtype, device, placement):
        send = filled(count, rank + 1, dtype, device)
        recv = torch.zeros_like(send)
        nxt, prv = (rank + 1) % n, (rank - 1) % n

        def op():
            for request in dist.batch_isend_irecv(
                [dist.P2POp(dist.isend, send, nxt), dist.P2POp(dist.irecv, recv, prv)]
            ):
                request.wait()

        return Case(op, lambda: count_wrong(recv, count, lambda j: Expected(prv + 1)), [recv, send])


COLLECTIVES: dict[str, Collective] = {
    c.name: c for c in (AllReduce(), AllGather(), ReduceScatter(), AllToAll(), Broadcast(), SendRecv())
}


def timed(w: Worker, fn: Callable[[], object], warmup: int, iters: int) -> float:
    """This rank's seconds per call: warm-up, barrier, timed loop, device synchronised before the clock is
    read."""
    for _ in range(warmup):
        fn()
    w.synchronize()
    dist.barrier()
    start = time.perf_counter()
    for _ in range(iters):
        fn()
    w.synchronize()  # a CPU–GPU sync point: the clock must not stop before the device does
    return (time.perf_counter() - start) / iters


def group_stats(w: Worker, seconds: float, wrong: float) -> tuple[float, float]:
    """(slowest rank's seconds, wrong elements over all ranks), as nccl-tests reports them, in one
    collective."""
    mine = torch.tensor([seconds, wrong], dtype=torch.float64, device=w.device)
    every = torch.empty(2 * w.world, dtype=torch.float64, device=w.device)
    all_gather_single(every, mine)
    every = every.view(w.world, 2)
    return float(every[:, 0].max().item()), float(every[:, 1].sum().item())


def measure(w: Worker, coll: Collective, size: int, placement: str, args, dtype) -> list[Row]:
    elem = torch.tensor([], dtype=dtype).element_size()
    count, nbytes = coll.counts(size, w.world, elem)
    if count == 0:
        return []
    case = coll.build(count, w.rank, w.world, dtype, w.device, placement)
    case.op()
    w.synchronize()
    # test hook: prove the check sees a bad element
    if args.inject_wrong == coll.name and w.rank == w.world - 1:
        case.buffers[0].view(-1)[0] += 1
    wrong = case.check()
    for b in case.buffers:
        b.zero_()
    seconds, wrong = group_stats(w, timed(w, case.op, args.warmup, args.iters), wrong)
    if w.rank != 0:
        return []
    common = dict(
        stage=args.stage,
        case=coll.name,
        size_bytes=nbytes,
        count=count,
        dtype=args.dtype,
        redop=coll.redop,
        root=coll.root,
        placement=placement,
        source="torch",
        world=w.world,
        algo=args.algo,
    )
    algbw = algbw_GBps(nbytes, seconds)
    return [
        Row(metric="time_us", value=seconds * 1e6, unit="us", **common),
        Row(metric="algbw", value=algbw, unit="GB/s", **common),
        Row(metric="busbw", value=algbw * busbw_factor(coll.name, w.world), unit="GB/s", **common),
        Row(metric="wrong", value=float(wrong), unit="count", **common),
    ]


def bare_comparison(w: Worker, size: int, args, dtype) -> list[Row]:
    """Harness overhead: the sweep's all_reduce timing and a bare `dist.all_reduce` loop, alternated, same
    size."""
    elem = torch.tensor([], dtype=dtype).element_size()
    count = size // elem
    rows = []
    for rep in range(args.bare_repeats):
        harness = measure(w, COLLECTIVES["all_reduce"], size, "ip", args, dtype)
        x = torch.zeros(count, dtype=dtype, device=w.device)
        for _ in range(args.warmup):
            dist.all_reduce(x)
        w.synchronize()
        dist.barrier()
        start = time.perf_counter()
        for _ in range(args.iters):
            dist.all_reduce(x)
        w.synchronize()
        seconds, _ = group_stats(w, (time.perf_counter() - start) / args.iters, 0.0)
        if w.rank == 0:
            common = dict(
                stage=args.stage,
                size_bytes=count * elem,
                count=count,
                dtype=args.dtype,
                redop="sum",
                root=-1,
                placement="ip",
                world=w.world,
                repeat=rep,
            )
            busbw = algbw_GBps(count * elem, seconds) * busbw_factor("all_reduce", w.world)
            harness_busbw = next(r.value for r in harness if r.metric == "busbw")
            rows += [
                Row(
                    case="overhead.harness",
                    metric="busbw",
                    value=harness_busbw,
                    unit="GB/s",
                    source="torch",
                    **common,
                ),
                Row(
                    case="overhead.bare",
                    metric="busbw",
                    value=busbw,
                    unit="GB/s",
                    source="torch-bare",
                    **common,
                ),
            ]
    return rows


def memory_budget(w: Worker, override: int | None = None) -> int | None:
    """Bytes one case may hold on every rank: the smallest rank's free memory less RESERVE_BYTES, times
    FREE_SHARE (every rank must drop the same cases, or the collectives mismatch); None on a CPU."""
    if override is not None:
        return override
    if w.device.type != "cuda":
        return None
    free, _ = torch.cuda.mem_get_info(w.device)
    smallest = torch.tensor([free], dtype=torch.int64, device=w.device)
    dist.all_reduce(smallest, op=dist.ReduceOp.MIN)
    return int(max(0, int(smallest.item()) - RESERVE_BYTES) * FREE_SHARE)


def fit_to_memory(
    plan: list[tuple[str, int, str]], world: int, elem: int, budget: int | None
) -> tuple[list[tuple[str, int, str]], list[tuple[str, int, str, int, int]]]:
    """(the cases that fit the budget, the dropped ones as (name, size, placement, S bytes, bytes needed))."""
    if budget is None:
        return plan, []
    kept, dropped = [], []
    for name, size, placement in plan:
        coll = COLLECTIVES[name]
        nbytes = coll.counts(size, world, elem)[1]
        need = coll.peak_bytes(nbytes, world, placement)
        if need <= budget:
            kept.append((name, size, placement))
        else:
            dropped.append((name, size, placement, nbytes, need))
    return kept, dropped


def dropped_rows(dropped, budget: int, args, world: int) -> list[Row]:
    """One row per case not run for memory: the bytes it would hold at once, and the budget it exceeds."""

    def size(b: int) -> str:
        return f"{b / (1 << 30):.2f} GiB" if b >= 1 << 24 else f"{b} B"

    return [
        Row(
            stage=args.stage,
            case=name,
            metric="dropped",
            value=float(need),
            unit="bytes",
            size_bytes=nbytes,
            dtype=args.dtype,
            placement=placement,
            source="torch",
            world=world,
            algo=args.algo,
            text=(
                f"not run: holds {size(need)} at once, over the {size(budget)} budget ({FREE_SHARE:.0%} "
                f"of the smallest rank's free memory less {size(RESERVE_BYTES)})"
            ),
        )
        for name, _, placement, nbytes, need in dropped
    ]


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", required=True, help="comma-separated message sizes, bytes")
    p.add_argument("--collectives", default=",".join(COLLECTIVES))
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--iters", type=int, default=5)
    p.add_argument("--dtype", default="float32")
    p.add_argument("--stage", default="bandwidth", help="stage name the rows carry")
    p.add_argument(
        "--algo", default=None, help="label for the rows' algo column (e.g. the NCCL_ALGO in force)"
    )
    p.add_argument(
        "--bare-repeats",
        type=int,
        default=0,
        help="also time a bare dist.all_reduce loop at the largest size, alternating with the harness",
    )
    p.add_argument(
        "--inject-wrong",
        default=None,
        metavar="COLLECTIVE",
        help="test hook: the last rank corrupts one result element of COLLECTIVE before the check",
    )
    p.add_argument(
        "--memory-budget",
        type=int,
        default=None,
        metavar="BYTES",
        help="bytes one case may hold (default: measured from the GPUs' free memory; none on CPU)",
    )
    p.add_argument(
        "--time-budget-s",
        type=float,
        default=None,
        metavar="SECONDS",
        help="stop growing a collective's sizes when the next would pass this many seconds from the "
        "sweep's start, shared among the collectives (suite/costmodel/size_budget.py; default: no limit)",
    )
    p.add_argument(
        "--probe",
        action="store_true",
        help="first try every primitive once (suite/workloads/probe.py): which the backend supports",
    )
    p.add_argument(
        "--mistakes", default="", help="the probe's deliberate mistakes, wrong.<primitive> (tests)"
    )
    args = p.parse_args(argv)
    args.mistakes = mistakes_from(args)
    probe.check_mistakes(args.mistakes, p.error)
    args.sizes = [int(s) for s in args.sizes.split(",") if s]
    args.collectives = [c for c in args.collectives.split(",") if c]
    unknown = [c for c in args.collectives if c not in COLLECTIVES]
    if unknown:
        p.error(f"unknown collective(s) {unknown}: choose from {', '.join(COLLECTIVES)}")
    return args


def main(argv=None) -> None:
    args = parse_args(argv)
    dtype = getattr(torch, args.dtype)
    elem = torch.tensor([], dtype=dtype).element_size()
    with worker_session() as w:
        if args.probe:  # every rank its own rows: the probe needs no collective to report
            w.emit(probe.probe_rows(w, args.stage, args.mistakes))
        plan = [
            (c, s, p)
            for c in args.collectives
            for s in args.sizes
            for p in COLLECTIVES[c].placements
            if not (c == "sendrecv" and w.world == 1)
        ]
        budget = memory_budget(w, args.memory_budget)
        plan, dropped = fit_to_memory(plan, w.world, elem, budget)
        if dropped and w.rank == 0:
            w.emit(dropped_rows(dropped, budget, args, w.world))

        def step(name: str, size: int, placement: str) -> list[Row]:
            rows = measure(w, COLLECTIVES[name], size, placement, args, dtype)
            if w.device.type == "cuda" and size >= 1 << 30:
                torch.cuda.empty_cache()  # give the next large case unfragmented memory
            return rows

        # rows emitted as measured; sizes past the time dropped
        run_steps(w, plan, args.time_budget_s, args, step)
        reduce_sizes = [size for name, size, _ in plan if name == "all_reduce"]
        if args.bare_repeats and reduce_sizes:  # the rehearsal's harness-overhead figure
            w.progress("harness vs bare all_reduce", done=len(plan), of=len(plan))
            w.emit(bare_comparison(w, max(reduce_sizes), args, dtype))


if __name__ == "__main__":
    main()
