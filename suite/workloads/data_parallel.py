"""Data parallelism and the ZeRO stages with torch's own wrappers, trained and measured the same way.

    result = train_data_parallel(cfg, zero=3, device=device, group=None, mesh=mesh,
                                 warmup=1, steps=3, reference=ref_params)

    zero 0  plain DDP                                   (everything replicated)
    zero 1  DDP + ZeroRedundancyOptimizer               (optimizer state sharded)
    zero 2  FSDP2 fully_shard, reshard_after_forward=False  (gradients and optimizer state sharded;
            parameters gathered once per step and kept through the backward)
    zero 3  FSDP2 fully_shard, reshard_after_forward=True   (parameters too: gathered per block for
            the forward and again for the backward)

FSDP2 wraps each block, then the root (embedding, final norm, head), so a block's parameters are
gathered just before it runs. Every rank draws the same global batch and trains on its slice.

Deliberate mistakes the golden comparison must catch:
  no_sync        gradients never reduced across ranks (DDP's no_sync left on; FSDP2's
                 set_requires_gradient_sync(False)): every rank steps on its own slice's gradient
  per_rank_seed  weights and batch drawn from seed + rank (DDP broadcasts rank 0's weights, which
                 hides the weights but not the batch; FSDP2 keeps each rank's own shard)
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass, field

import torch
import torch.distributed as dist

from suite.config import GptConfig
from suite.workloads.golden import full, group_max, max_abs_error_many
from suite.workloads.gpt import build_model
from suite.workloads.measure import PeakMemory, time_steps, typical
from suite.workloads.training import (
    adamw_kwargs,
    local_batch,
    make_optimizer,
    seed_for_rank,
    state_bytes,
    train_step,
    wrap_ddp,
)

DP_MISTAKES = ("no_sync", "per_rank_seed")
ZERO_NAMES = {0: "ddp", 1: "zero1", 2: "zero2", 3: "zero3"}


@dataclass
class TrainingResult:
    step_times_s: list[float] = field(default_factory=list)
    peak_memory_bytes: float = float("nan")
    """Largest over the group of each rank's peak above its starting level (build, wrap, warm-up steps)."""
    state_bytes: dict[str, float] = field(default_factory=dict)
    """Largest over the group: parameters, gradients, optimizer state held after the last step."""
    max_abs_error: float = float("nan")
    """Largest |parameter − single-process parameter| over every element and rank; NaN when not compared."""

    @property
    def step_time_s(self) -> float:
        return typical(self.step_times_s)


def build_data_parallel(
    cfg: GptConfig, zero: int, device: torch.device, group: dist.ProcessGroup | None, mesh=None
) -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    """The model wrapped for ZeRO stage `zero` (0 = DDP) and its optimizer."""
    model = build_model(cfg, device)
    if zero in (0, 1):
        model = wrap_ddp(model, device, group)
        if zero == 0:
            return model, make_optimizer(model.parameters())
        from torch.distributed.optim import ZeroRedundancyOptimizer

        return model, ZeroRedundancyOptimizer(
            model.parameters(), optimizer_class=torch.optim.AdamW, process_group=group, **adamw_kwargs()
        )
    if zero in (2, 3):
        from torch.distributed.fsdp import fully_shard

        if mesh is None:
            raise ValueError("FSDP2 (ZeRO-2/3) needs a DeviceMesh over the data-parallel ranks: pass mesh=")
        reshard = zero == 3
        for block in model.blocks:
            fully_shard(block, mesh=mesh, reshard_after_forward=reshard)
        fully_shard(model, mesh=mesh, reshard_after_forward=reshard)
        return model, make_optimizer(model.parameters())
    raise ValueError(f"ZeRO stage {zero} unknown: 0 (DDP), 1, 2 or 3")


def _gradient_sync(model: torch.nn.Module, zero: int, mistake: str | None):
    """A fresh context for training steps; under the no_sync mistake, gradients are not reduced in it."""
    if mistake != "no_sync":
        return contextlib.nullcontext()
    if zero in (0, 1):
        return model.no_sync()
    model.set_requires_gradient_sync(False)
    return contextlib.nullcontext()


def parameters_error(model: torch.nn.Module, reference: dict[str, torch.Tensor], group) -> float:
    """max |parameter − reference| over every parameter (FSDP2 shards gathered) and every rank of `group`."""
    inner = getattr(model, "module", model)  # DDP's wrapped module; FSDP2 keeps the names as they were
    pairs = [(full(p.detach()), reference[name]) for name, p in inner.named_parameters()]
    missing = set(reference) - {name for name, _ in inner.named_parameters()}
    error = math.inf if missing else max_abs_error_many(pairs)
    return group_max(error, group)


def train_data_parallel(
    cfg: GptConfig,
    zero: int,
    device: torch.device,
    group: dist.ProcessGroup | None,
    *,
    mesh=None,
    warmup: int,
    steps: int,
    reference: dict[str, torch.Tensor] | None = None,
    mistake: str | None = None,
    measure: bool = True,
) -> TrainingResult:
    """Train warmup + steps steps under ZeRO stage `zero` on this rank's slices of the global batches.

    measure: build and warm-up run inside PeakMemory, the remaining steps are timed.
    reference: parameters of single-process training over the same warmup + steps batches; when
    given, the parameters after training are compared with them elementwise.
    """
    if mistake not in (None, *DP_MISTAKES):
        raise ValueError(f"unknown data-parallel mistake {mistake!r}: one of {', '.join(DP_MISTAKES)}")
    rank, world = dist.get_rank(group), dist.get_world_size(group)
    rank_cfg = seed_for_rank(cfg, rank, mistake)
    batches = [local_batch(rank_cfg, s, rank, world, device) for s in range(warmup + steps)]
    result = TrainingResult()
    memory = PeakMemory(device) if measure else contextlib.nullcontext()
    with memory:
        model, optimizer = build_data_parallel(rank_cfg, zero, device, group, mesh)
        with _gradient_sync(model, zero, mistake):
            for s in range(warmup):
                train_step(model, optimizer, *batches[s])
    counter = iter(range(warmup, warmup + steps))
    with _gradient_sync(model, zero, mistake):
        times = time_steps(lambda: train_step(model, optimizer, *batches[next(counter)]), steps, device)
    result.step_times_s = [group_max(t, group) for t in times]
    if measure:
        result.peak_memory_bytes = group_max(float(memory.peak_bytes), group)
        result.state_bytes = {k: group_max(float(v), group) for k, v in state_bytes(model, optimizer).items()}
    if reference is not None:
        result.max_abs_error = parameters_error(model, reference, group)
    return result
