"""DDP's buckets, watched: which parameters land in which bucket, and when each bucket's all-reduce is
launched and completes against the backward pass, all on one clock.

    watched = watch_backward(cfg, mode, w)      # after DDP's bucket rebuild (its third backward)
    rows = watch_rows(watched, label, world, dtype)

A DDP communication hook does DDP's own reduction (divide by the world, all-reduce, sum) and records, per
bucket, its index, its parameters (`bucket.parameters()`), the moment it is launched and, from the
future's callback, the moment the all-reduce completes. A tensor hook on every parameter marks when its
gradient is computed: it runs before the gradient is accumulated into `.grad`, so before DDP's reducer
sees it, and a bucket can never be launched before the last of its gradients is marked.

One clock: on a CPU `time.perf_counter`; on a GPU CUDA events on the stream doing the work (the
backward's stream for gradients and launches; inside the future's callback, which torch runs on a stream
ordered after the all-reduce, for completions), read as milliseconds since an event recorded just before
backward, after a synchronisation. The GPU timeline therefore shows whether the all-reduces finish while
backward still runs (hidden) or after it (exposed).

The watched model is a fresh DDP wrapper, not the one the gradient check compares: that check stays on
DDP's built-in reducer.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch
import torch.distributed as dist

from suite.config import GptConfig
from suite.results import Row
from suite.workloads.ddp_modes import OverlapMode, wrap
from suite.workloads.gpt import build_model, loss_fn
from suite.workloads.training import local_batch

STAGE = "overlap"
WATCH_STEP = 2_000_000  # the watched batches' step indices: none a timed or checked step draws
REBUILD_STEPS = 2  # DDP rebuilds its buckets after the first backward; the third is watched
BUCKET_CASE = "watch.bucket."
LAYER_CASE = "watch.layer."
BACKWARD_CASE = "watch.backward"


class CpuClock:
    """Marks are perf_counter readings; seconds are since `start()`."""

    def start(self) -> None:
        self.t0 = time.perf_counter()

    def mark(self):
        return time.perf_counter()

    def seconds(self, mark) -> float:
        return mark - self.t0


class CudaClock:
    """Marks are CUDA events recorded on the current stream; seconds are read after a synchronisation."""

    def __init__(self, device: torch.device):
        self.device = device

    def start(self) -> None:
        self.t0 = self.mark()

    def mark(self):
        event = torch.cuda.Event(enable_timing=True)
        event.record()
        return event

    def seconds(self, mark) -> float:
        torch.cuda.synchronize(self.device)
        return self.t0.elapsed_time(mark) / 1e3


def clock_for(device: torch.device):
    return CudaClock(device) if device.type == "cuda" else CpuClock()


@dataclass
class BucketSeen:
    index: int
    params: list[str]
    nbytes: int
    launched: object = None
    done: object = None


@dataclass
class Watch:
    """What one backward pass showed; marks still on the clock (see seconds())."""

    clock: object
    names: dict[int, str]
    """id(parameter) → its name (without DDP's `module.` prefix)."""
    ready: dict[str, object] = field(default_factory=dict)
    """parameter name → the mark of its (last) gradient."""
    buckets: dict[int, BucketSeen] = field(default_factory=dict)
    recording: bool = False
    backward_end: object = None


def comm_hook(watch, bucket):
    """DDP's reduction (average over ranks) with the bucket's contents and times recorded. Unannotated:
    DDP checks a hook's annotations against dist.GradBucket, and this module's are strings."""
    buffer = bucket.buffer()
    seen = None
    if watch.recording:
        seen = BucketSeen(
            index=bucket.index(),
            params=[watch.names[id(p)] for p in bucket.parameters()],
            nbytes=buffer.numel() * buffer.element_size(),
            launched=watch.clock.mark(),
        )
        watch.buckets[seen.index] = seen
    buffer.div_(dist.get_world_size())
    future = dist.all_reduce(buffer, async_op=True).get_future()

    def completed(fut):
        if seen is not None:
            seen.done = watch.clock.mark()
        return fut.value()[0]

    return future.then(completed)


def watched_ddp(cfg: GptConfig, mode: OverlapMode, device: torch.device):
    ddp = wrap(build_model(cfg, device), mode, device)
    names = {id(p): name.removeprefix("module.") for name, p in ddp.named_parameters()}
    watch = Watch(clock=clock_for(device), names=names)
    ddp.register_comm_hook(watch, comm_hook)
    for name, p in ddp.named_parameters():
        short = name.removeprefix("module.")

        def ready(grad, short=short):
            if watch.recording:
                watch.ready[short] = watch.clock.mark()
            return grad

        p.register_hook(ready)
    return ddp, watch


def watch_backward(cfg: GptConfig, mode: OverlapMode, w) -> Watch:
    """Two unwatched steps (DDP rebuilds its buckets in gradient-ready order), then one watched backward."""
    ddp, watch = watched_ddp(cfg, mode, w.device)
    for step in range(REBUILD_STEPS + 1):
        tokens, targets = local_batch(cfg, WATCH_STEP + step, w.rank, w.world, w.device)
        loss = loss_fn(ddp(tokens), targets)
        w.synchronize()
        watch.recording = step == REBUILD_STEPS
        if watch.recording:
            watch.clock.start()
        loss.backward()  # DDP waits for every bucket's future before backward returns
        if watch.recording:
            watch.backward_end = watch.clock.mark()
        watch.recording = False
        ddp.zero_grad(set_to_none=True)
    w.synchronize()
    return watch


def layer_of(name: str) -> str:
    """`blocks.1.attn.q.weight` → `blocks.1`; `head.weight` → `head`."""
    parts = name.split(".")
    return ".".join(parts[:2]) if len(parts) > 2 and parts[1].isdigit() else parts[0]


def watch_rows(watch: Watch, label: str, world: int, dtype: str) -> list[Row]:
    """Seconds since backward began: per bucket (in all-reduce order) its bytes and parameters (text), the
    moment its last gradient was computed, its launch and its completion; per layer (in the order backward
    finished them) its first and last gradient; and backward's end."""
    s = watch.clock.seconds
    ready = {name: s(mark) for name, mark in watch.ready.items()}
    common = dict(stage=STAGE, overlap=label, world=world, dtype=dtype, unit="s", source="measured")
    rows = [Row(case=BACKWARD_CASE, metric="backward_end_s", value=s(watch.backward_end), **common)]
    for b in sorted(watch.buckets.values(), key=lambda b: b.index):
        case = f"{BUCKET_CASE}{b.index}"
        last = max((ready[p] for p in b.params if p in ready), default=float("nan"))
        rows += [
            Row(
                case=case,
                metric="bucket_bytes",
                value=float(b.nbytes),
                **{**common, "unit": "bytes"},
                text=" ".join(b.params),
            ),
            Row(case=case, metric="bucket_ready_s", value=last, **common),
            Row(case=case, metric="bucket_launch_s", value=s(b.launched), **common),
            Row(
                case=case,
                metric="bucket_done_s",
                value=s(b.done) if b.done is not None else float("nan"),
                **common,
            ),
        ]
    layers: dict[str, list[float]] = {}
    for name, t in ready.items():
        layers.setdefault(layer_of(name), []).append(t)
    for i, (layer, times) in enumerate(sorted(layers.items(), key=lambda kv: max(kv[1]))):
        rows += [
            Row(case=f"{LAYER_CASE}{i}", metric="layer_grad_first_s", value=min(times), **common, text=layer),
            Row(case=f"{LAYER_CASE}{i}", metric="layer_grad_last_s", value=max(times), **common, text=layer),
        ]
    return rows
