"""DDP training steps with gradient communication overlapped with backward, or issued after it.

    mode = OverlapMode.parse("25")          # DDP's bucketed reducer, bucket_cap_mb=25
    mode = OverlapMode.parse("default")     # DDP's defaults (25 MiB buckets, first bucket 1 MiB)
    mode = OverlapMode.parse("none")        # no_sync() through backward, then one all-reduce of all gradients
    ddp = wrap(model, mode)
    timing = train_step(ddp, mode, tokens, targets, optimizer, synchronize)

Used by suite/stages/overlap/worker.py (every mode, gradients compared) and
suite/stages/profile/worker.py (the default mode under a profiler).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from suite.costmodel.buckets import OverlapMode
from suite.workloads.gpt import loss_fn
from suite.workloads.training import wrap_ddp


def wrap(model: torch.nn.Module, mode: OverlapMode, device: torch.device) -> DDP:
    """DDP as every stage uses it (suite/workloads/training.py), at the mode's bucket size."""
    if mode.bucket_cap_mb is None:
        return wrap_ddp(model, device)
    return wrap_ddp(model, device, bucket_cap_mb=mode.bucket_cap_mb)


def all_reduce_flat(ddp: DDP, world: int) -> None:
    """Every gradient in one flat buffer, one all-reduce (sum), divided by the world: DDP's average,
    unbucketed."""
    grads = [p.grad for p in ddp.parameters() if p.grad is not None]
    flat = torch._utils._flatten_dense_tensors(grads)
    dist.all_reduce(flat)
    flat.div_(world)
    for g, reduced in zip(grads, torch._utils._unflatten_dense_tensors(flat, grads)):
        g.copy_(reduced)


@dataclass(frozen=True)
class StepTiming:
    step_s: float
    """Forward, backward, gradient communication and optimizer step, seconds."""
    compute_s: float
    """Forward and backward, seconds (without overlap: before the all-reduce starts; with it: NaN)."""
    comm_s: float
    """The flat all-reduce after backward, seconds (NaN with overlap: it runs inside backward)."""


def forward_backward(ddp: DDP, mode: OverlapMode, tokens: torch.Tensor, targets: torch.Tensor) -> None:
    """Gradients of the local batch, reduced across ranks the mode's way."""
    if mode.overlap:
        loss_fn(ddp(tokens), targets).backward()
        return
    with ddp.no_sync():
        loss_fn(ddp(tokens), targets).backward()
    all_reduce_flat(ddp, dist.get_world_size())


def train_step(
    ddp: DDP,
    mode: OverlapMode,
    tokens: torch.Tensor,
    targets: torch.Tensor,
    optimizer: torch.optim.Optimizer | None,
    synchronize: Callable[[], None],
) -> StepTiming:
    """One timed step; the device is synchronised before each clock reading."""
    nan = float("nan")
    synchronize()
    start = time.perf_counter()
    if mode.overlap:
        loss_fn(ddp(tokens), targets).backward()
        compute_end = comm_end = nan
    else:
        with ddp.no_sync():
            loss_fn(ddp(tokens), targets).backward()
        synchronize()
        compute_end = time.perf_counter()
        all_reduce_flat(ddp, dist.get_world_size())
        synchronize()
        comm_end = time.perf_counter()
    if optimizer is not None:
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    synchronize()
    end = time.perf_counter()
    return StepTiming(step_s=end - start, compute_s=compute_end - start, comm_s=comm_end - compute_end)


def bucket_sizes(ddp: DDP) -> list[int]:
    """The bucket sizes DDP reduces with, bytes, in all-reduce order (after its rebuild at the second
    step)."""
    data = ddp._get_ddp_logging_data()
    text = data.get("rebuilt_bucket_sizes") or data.get("bucket_sizes") or ""
    return [int(x) for x in str(text).replace(",", " ").split()]
