"""The torch.distributed collective sweep, with nccl-tests' columns, checking and timing.

    ctx.torchrun("suite.workloads.collective_sweep",
                 ["--sizes", "8,128,2048", "--collectives", "all_reduce,all_gather", "--warmup", "2", "--iters", "5"])

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

from ..costmodel.alphabeta import algbw_GBps, busbw_factor
from ..results import Row
from .worker import Worker, worker_session

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


def chunks(n: int, count: int, fill: Callable[[int], torch.Tensor], dtype, device) -> torch.Tensor:
    """n chunks of count elements, chunk j = fill(j), written in place (torch.cat would hold every chunk twice)."""
    out = torch.empty(n * count, dtype=dtype, device=device)
    for j in range(n):
        out[j * count:(j + 1) * count].copy_(fill(j))
    return out


@dataclass
class Case:
    """One collective at one size and placement, ready to run: `op()` runs it, `check()` counts wrong elements."""

    op: Callable[[], None]
    check: Callable[[], int]
    buffers: list[torch.Tensor]
    """Every buffer the case uses, the result first."""


class Collective(abc.ABC):
    """An nccl-tests test file's slots: name, counts, data and expected value, the call."""

    name = ""
    redop = "sum"
    root = -1
    placements: tuple[str, ...] = ("oop",)
    per_rank_chunks = True  # S is split into n chunks (all_gather, reduce_scatter, all_to_all)

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


def _wrong(out: torch.Tensor, expected: torch.Tensor) -> int:
    return int((out != expected).sum().item())


class AllReduce(Collective):
    name, placements, per_rank_chunks = "all_reduce", ("ip",), False

    def build(self, count, rank, n, dtype, device, placement):
        buf = (rank + 1) + pattern(count, 0, dtype, device)
        expected = n * (n + 1) // 2 + n * pattern(count, 0, dtype, device)  # Σ(r+1) + n·p
        return Case(lambda: dist.all_reduce(buf), lambda: _wrong(buf, expected), [buf])


class AllGather(Collective):
    name, redop, placements = "all_gather", "none", ("oop", "ip")

    def build(self, count, rank, n, dtype, device, placement):
        out = torch.zeros(count * n, dtype=dtype, device=device)
        mine = (rank + 1) + pattern(count, 0, dtype, device)
        if placement == "ip":
            inp = out[rank * count:(rank + 1) * count]
            inp.copy_(mine)
        else:
            inp = mine
        expected = chunks(n, count, lambda j: (j + 1) + pattern(count, 0, dtype, device), dtype, device)
        return Case(lambda: all_gather_single(out, inp), lambda: _wrong(out, expected), [out, inp])


class ReduceScatter(Collective):
    name, placements = "reduce_scatter", ("oop", "ip")

    def build(self, count, rank, n, dtype, device, placement):
        inp = (rank + 1) + pattern(count * n, 0, dtype, device)
        out = inp[rank * count:(rank + 1) * count] if placement == "ip" else torch.zeros(count, dtype=dtype, device=device)
        expected = n * (n + 1) // 2 + n * pattern(count, rank * count, dtype, device)
        return Case(lambda: reduce_scatter_single(out, inp), lambda: _wrong(out, expected), [out, inp])


class AllToAll(Collective):
    name, redop = "all_to_all", "none"

    def build(self, count, rank, n, dtype, device, placement):
        # Rank r's chunk for peer j holds r + 1 + j + p; rank r then holds, from each j, j + 1 + r + p.
        p = pattern(count, 0, dtype, device)
        inp = chunks(n, count, lambda j: (rank + 1 + j) + p, dtype, device)
        out = torch.zeros_like(inp)
        expected = chunks(n, count, lambda j: (j + 1 + rank) + p, dtype, device)
        return Case(lambda: dist.all_to_all_single(out, inp), lambda: _wrong(out, expected), [out, inp])


class Broadcast(Collective):
    name, redop, root, placements, per_rank_chunks = "broadcast", "none", 0, ("ip",), False

    def build(self, count, rank, n, dtype, device, placement):
        expected = 1 + pattern(count, 0, dtype, device)
        buf = expected.clone() if rank == self.root else torch.zeros_like(expected)
        return Case(lambda: dist.broadcast(buf, src=self.root), lambda: _wrong(buf, expected), [buf])


class SendRecv(Collective):
    """nccl-tests' sendrecv: every rank sends to rank+1 and receives from rank−1 (a ring shift)."""

    name, redop, per_rank_chunks = "sendrecv", "none", False

    def build(self, count, rank, n, dtype, device, placement):
        send = (rank + 1) + pattern(count, 0, dtype, device)
        recv = torch.zeros_like(send)
        expected = ((rank - 1) % n + 1) + pattern(count, 0, dtype, device)
        nxt, prv = (rank + 1) % n, (rank - 1) % n

        def op():
            for request in dist.batch_isend_irecv([dist.P2POp(dist.isend, send, nxt), dist.P2POp(dist.irecv, recv, prv)]):
                request.wait()

        return Case(op, lambda: _wrong(recv, expected), [recv, send])


COLLECTIVES: dict[str, Collective] = {c.name: c for c in (AllReduce(), AllGather(), ReduceScatter(), AllToAll(),
                                                            Broadcast(), SendRecv())}


def timed(w: Worker, fn: Callable[[], object], warmup: int, iters: int) -> float:
    """This rank's seconds per call: warm-up, barrier, timed loop, device synchronised before the clock is read."""
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
    """(slowest rank's seconds, wrong elements over all ranks), as nccl-tests reports them, in one collective."""
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
    if args.inject_wrong == coll.name and w.rank == w.world - 1:  # test hook: prove the check sees a bad element
        case.buffers[0].view(-1)[0] += 1
    wrong = case.check()
    for b in case.buffers:
        b.zero_()
    seconds, wrong = group_stats(w, timed(w, case.op, args.warmup, args.iters), wrong)
    if w.rank != 0:
        return []
    common = dict(stage=args.stage, case=coll.name, size_bytes=nbytes, count=count, dtype=args.dtype,
                  redop=coll.redop, root=coll.root, placement=placement, source="torch", world=w.world, algo=args.algo)
    algbw = algbw_GBps(nbytes, seconds)
    return [Row(metric="time_us", value=seconds * 1e6, unit="us", **common),
            Row(metric="algbw", value=algbw, unit="GB/s", **common),
            Row(metric="busbw", value=algbw * busbw_factor(coll.name, w.world), unit="GB/s", **common),
            Row(metric="wrong", value=float(wrong), unit="count", **common)]


def bare_comparison(w: Worker, size: int, args, dtype) -> list[Row]:
    """Harness overhead: the sweep's all_reduce timing and a bare `dist.all_reduce` loop, alternated, same size."""
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
            common = dict(stage=args.stage, size_bytes=count * elem, count=count, dtype=args.dtype, redop="sum",
                          root=-1, placement="ip", world=w.world, repeat=rep)
            busbw = algbw_GBps(count * elem, seconds) * busbw_factor("all_reduce", w.world)
            harness_busbw = next(r.value for r in harness if r.metric == "busbw")
            rows += [Row(case="overhead.harness", metric="busbw", value=harness_busbw, unit="GB/s", source="torch", **common),
                     Row(case="overhead.bare", metric="busbw", value=busbw, unit="GB/s", source="torch-bare", **common)]
    return rows


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", required=True, help="comma-separated message sizes, bytes")
    p.add_argument("--collectives", default=",".join(COLLECTIVES))
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--iters", type=int, default=5)
    p.add_argument("--dtype", default="float32")
    p.add_argument("--stage", default="bandwidth", help="stage name the rows carry")
    p.add_argument("--algo", default=None, help="label for the rows' algo column (e.g. the NCCL_ALGO in force)")
    p.add_argument("--bare-repeats", type=int, default=0,
                   help="also time a bare dist.all_reduce loop at the largest size, alternating with the harness")
    p.add_argument("--inject-wrong", default=None, metavar="COLLECTIVE",
                   help="test hook: the last rank corrupts one result element of COLLECTIVE before the check")
    args = p.parse_args(argv)
    args.sizes = [int(s) for s in args.sizes.split(",") if s]
    args.collectives = [c for c in args.collectives.split(",") if c]
    unknown = [c for c in args.collectives if c not in COLLECTIVES]
    if unknown:
        p.error(f"unknown collective(s) {unknown}: choose from {', '.join(COLLECTIVES)}")
    return args


def main(argv=None) -> None:
    args = parse_args(argv)
    dtype = getattr(torch, args.dtype)
    with worker_session() as w:
        plan = [(c, s, p) for c in args.collectives for s in args.sizes for p in COLLECTIVES[c].placements
                if not (c == "sendrecv" and w.world == 1)]
        for i, (name, size, placement) in enumerate(plan):
            w.progress(f"{name} {placement} {size} B", done=i, of=len(plan))
            w.emit(measure(w, COLLECTIVES[name], size, placement, args, dtype))
        if args.bare_repeats:
            w.progress("harness vs bare all_reduce", done=len(plan), of=len(plan))
            w.emit(bare_comparison(w, max(args.sizes), args, dtype))


if __name__ == "__main__":
    main()
