"""The pipeline bubble measured: stages of fixed duration, each rank's busy time inside a common window.

    clock = BusyClock("wall", device)                    # "cuda": CUDA events on the compute stream
    idle = torch_schedule_idle(stages, schedule, clock, ...)   # or hand_1f1b_idle(...)

A sleep stage's forward sleeps `forward_s` and its backward `backward_s` (1:2, as a matmul's
backward costs two of its forwards): scheduling, not compute, makes the bubble, so a CPU measures it
for real. Busy time is the sum of the stage's compute calls (torch's `forward_one_chunk`,
`backward_one_chunk`, `backward_weight_one_chunk`; the hand-written schedule's forward and backward),
never its waits for a neighbour. The window is common to all ranks:

    barrier(); t0; step(); barrier(); t1        idle / total = 1 − busy / (t1 − t0)

(without the trailing barrier the last rank stops its clock early and reads too little idle).
That wall-clock idle moves with the machine's load; the wall clock also records every compute slot's start and
end on the host's monotonic clock (`slots`, `window_start`), from which suite/stages/pp/timeline.py replays
the schedule in slot units, which the load does not move.
"""

from __future__ import annotations

import time
from typing import Callable

import torch
import torch.distributed as dist
import torch.nn as nn

from suite.stages.pp.timeline import Slot, slot_kind

CHUNK_METHODS = ("forward_one_chunk", "backward_one_chunk", "backward_weight_one_chunk")
WIDTH = 8
"""Features of the sleep stages' activations: tiny, so the sleeps are all the work."""


class _Sleep(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, forward_s, backward_s):
        time.sleep(forward_s)
        ctx.backward_s = backward_s
        return x * 1.0

    @staticmethod
    def backward(ctx, grad):
        time.sleep(ctx.backward_s)
        return grad * 1.0, None, None


class SleepStage(nn.Module):
    """A linear layer (so there are gradients) followed by a fixed sleep forward and backward."""

    def __init__(self, forward_s: float, backward_s: float):
        super().__init__()
        self.linear = nn.Linear(WIDTH, WIDTH)
        self.forward_s, self.backward_s = forward_s, backward_s
        self.sleeping = True  # off for the warm-up step (shape inference), on when measured

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        on = self.sleeping
        return _Sleep.apply(self.linear(x), self.forward_s if on else 0.0, self.backward_s if on else 0.0)


class BusyClock:
    """Sums the durations of wrapped calls: wall time ("wall", the device synchronised around each call)
    or CUDA events on the current stream ("cuda": what the GPU spent, not what the host waited)."""

    def __init__(self, kind: str, device: torch.device):
        if kind not in ("wall", "cuda"):
            raise ValueError(f"clock {kind!r} unknown: use wall or cuda")
        self.kind, self.device = kind, device
        self.reset()

    def reset(self) -> None:
        self._wall = 0.0
        self._events: list[tuple[torch.cuda.Event, torch.cuda.Event]] = []
        self.slots: list[Slot] = []
        """The wall clock's compute calls, (kind, start, end) on time.monotonic(): one clock for every process
        of the host (CLOCK_MONOTONIC), so ranks' slots compare."""
        self.window_start = 0.0

    def timed(self, fn: Callable, name: str | None = None, stage: int | None = None) -> Callable:
        """`fn` timed. Its slots name `stage` and their micro-batch: torch's chunk id (the first argument),
        else the count of this kind's calls so far (the hand-written schedule runs the micro-batches in
        order)."""
        kind = slot_kind(name or fn.__name__)  # None: timed, not a slot (a call that is neither F nor B)

        def call(*args, **kwargs):
            if self.kind == "cuda":
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                out = fn(*args, **kwargs)
                end.record()
                self._events.append((start, end))
                return out
            _sync(self.device)
            t0 = time.monotonic()
            out = fn(*args, **kwargs)
            _sync(self.device)
            t1 = time.monotonic()
            self._wall += t1 - t0
            if kind is not None:
                counted = sum(1 for slot in self.slots if slot.kind == kind and slot.stage == stage)
                microbatch = args[0] if args and isinstance(args[0], int) else counted
                self.slots.append(Slot(kind, t0, t1, stage, microbatch))
            return out

        return call

    def wrap_stages(self, stages: list) -> None:
        """Time every compute call of torch's PipelineStages."""
        for stage in stages:
            for name in CHUNK_METHODS:
                setattr(stage, name, self.timed(getattr(stage, name), name, stage.stage_index))

    def busy_s(self) -> float:
        if self.kind == "cuda":
            torch.cuda.synchronize(self.device)
            return sum(s.elapsed_time(e) for s, e in self._events) / 1e3
        return self._wall


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def window_s(
    step: Callable[[], None],
    device: torch.device,
    group: dist.ProcessGroup | None,
    clock: BusyClock | None = None,
) -> float:
    """Seconds of `step` inside barrier … barrier on `group`, the device drained at both ends (so the host
    clock reads what the card did: the busy time inside it comes from CUDA events on GPUs). `clock`, if
    given, notes the window's start."""
    dist.barrier(group=group)
    _sync(device)
    t0 = time.monotonic()
    if clock is not None:
        clock.window_start = t0
    step()
    dist.barrier(group=group)
    _sync(device)
    return time.monotonic() - t0


def measure_idle(
    step: Callable[[], None], clock: BusyClock, device: torch.device, group: dist.ProcessGroup | None
) -> tuple[float, float]:
    """(idle/total, window seconds) of one measured step on this rank."""
    clock.reset()
    total = window_s(step, device, group, clock)
    return max(0.0, 1.0 - clock.busy_s() / total), total


def hand_1f1b(
    module: nn.Module,
    microbatches: int,
    group: dist.ProcessGroup,
    device: torch.device,
    clock: BusyClock,
    extra_barrier: bool = False,
) -> None:
    """One step of 1F1B over isend/irecv, written out (Narayanan et al. 2021, fig. 4): rank r runs
    P − r − 1 warm-up forwards, then alternates one forward and one backward, then drains the backwards.

    Every exchange is a batch_isend_irecv waited at once, pairing "send my activation, receive my
    gradient" (and the reverse), so ranks never both block on a send (NCCL's p2p needs the pairing).
    `extra_barrier` is the deliberate mistake the drill must catch: a barrier after each backward's
    exchange (M per rank, so it cannot hang), which holds a rank's next forward until its neighbour's
    backward has ended."""
    ranks, rank = dist.get_world_size(group), dist.get_rank(group)
    prev_rank = dist.get_global_rank(group, rank - 1) if rank > 0 else None
    next_rank = dist.get_global_rank(group, rank + 1) if rank < ranks - 1 else None
    shape = (1, WIDTH)

    def exchange(send_to=None, send=None, recv_from=None):
        ops, got = [], None
        if send_to is not None:
            ops.append(dist.P2POp(dist.isend, send.contiguous(), send_to, group=group))
        if recv_from is not None:
            got = torch.empty(shape, device=device)
            ops.append(dist.P2POp(dist.irecv, got, recv_from, group=group))
        for work in dist.batch_isend_irecv(ops) if ops else []:
            work.wait()
        return got

    pending: list[tuple[torch.Tensor, torch.Tensor]] = []  # (input, output) of forwards awaiting backward

    def forward(x):
        x = x.detach().requires_grad_(rank > 0)
        y = module(x)
        pending.append((x, y))
        return y.detach()

    def backward(grad):
        x, y = pending.pop(0)
        if next_rank is None:
            y.sum().backward()
        else:
            y.backward(grad)
        return x.grad

    forward, backward = clock.timed(forward, stage=rank), clock.timed(backward, stage=rank)

    def first_input():
        return torch.ones(shape, device=device) if prev_rank is None else exchange(recv_from=prev_rank)

    warmup = min(ranks - rank - 1, microbatches)
    for _ in range(warmup):
        exchange(send_to=next_rank, send=forward(first_input()))
    steady = microbatches - warmup
    x = first_input() if steady else None
    for i in range(steady):
        y = forward(x)
        grad = exchange(send_to=next_rank, send=y, recv_from=next_rank)  # send forward, receive backward
        dx = backward(grad)
        if i == steady - 1:
            exchange(send_to=prev_rank, send=dx)
        else:  # send backward, receive the next forward's input (rank 0 makes its own)
            x = exchange(send_to=prev_rank, send=dx, recv_from=prev_rank)
            x = torch.ones(shape, device=device) if x is None else x
        if extra_barrier:
            dist.barrier(group=group)
    for _ in range(warmup):
        dx = backward(exchange(recv_from=next_rank))
        exchange(send_to=prev_rank, send=dx)
        if extra_barrier:
            dist.barrier(group=group)
