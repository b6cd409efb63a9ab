"""One training step of the GPT model, and the pieces every scaling workload shares.

    model = build_model(cfg, device)
    optimizer = make_optimizer(model.parameters())
    tokens, targets = local_batch(cfg, step, rank=0, world=1, device=device)
    loss = train_step(model, optimizer, tokens, targets)          # forward, backward, AdamW

A step is forward + backward + one AdamW update on the given batch. Data parallel code hands
each rank its slice of the global batch (`local_batch`); DDP averages gradients, so the slices'
mean losses average to the global batch's mean loss and the update equals one process's.
`train_single_process` is the golden reference the partitioned runs are compared with.
`wrap_ddp` is DDP as every stage uses it (the overlap and fault stages included).
"""

from __future__ import annotations

import dataclasses
from typing import Iterable

import torch
import torch.distributed as dist
import torch.nn as nn

from suite.config import GptConfig
from suite.workloads.gpt import build_model, loss_fn, synthetic_batch

LEARNING_RATE = 1e-3
"""AdamW learning rate of every scaling workload."""
WEIGHT_DECAY = 0.1
BETAS = (0.9, 0.95)
EPS = 1e-8
"""AdamW's ε: with it, a gradient that is pure reduction-order noise (|g| ≪ ε) moves a parameter by ≪ lr."""


def adamw_kwargs(lr: float = LEARNING_RATE) -> dict:
    """The AdamW settings, for optimizer_class-style constructors (ZeroRedundancyOptimizer)."""
    return {"lr": lr, "betas": BETAS, "eps": EPS, "weight_decay": WEIGHT_DECAY}


def make_optimizer(params: Iterable[torch.nn.Parameter], lr: float = LEARNING_RATE) -> torch.optim.Optimizer:
    """AdamW with the suite's settings."""
    return torch.optim.AdamW(params, **adamw_kwargs(lr))


def train_step(
    model: nn.Module, optimizer: torch.optim.Optimizer, tokens: torch.Tensor, targets: torch.Tensor
) -> torch.Tensor:
    """Forward, backward, one optimizer step; returns the loss (detached, still on the device)."""
    optimizer.zero_grad(set_to_none=True)
    loss = loss_fn(model(tokens), targets)
    loss.backward()
    optimizer.step()
    return loss.detach()


def local_batch(
    cfg: GptConfig, step: int, rank: int, world: int, device: torch.device | str = "cpu"
) -> tuple[torch.Tensor, torch.Tensor]:
    """This rank's contiguous slice of global step `step`'s batch (cfg.batch sequences split over `world`)."""
    if cfg.batch % world:
        raise ValueError(
            f"global batch {cfg.batch} does not split over {world} ranks: "
            f"choose a batch that is a multiple of every DP degree"
        )
    per_rank = cfg.batch // world
    tokens, targets = synthetic_batch(cfg, step)
    lo = rank * per_rank
    return tokens[lo : lo + per_rank].to(device), targets[lo : lo + per_rank].to(device)


def seed_for_rank(cfg: GptConfig, rank: int, mistake: str | None) -> GptConfig:
    """The configuration a rank builds from: the same seed everywhere, unless the per_rank_seed mistake is
    made."""
    return dataclasses.replace(cfg, seed=cfg.seed + rank) if mistake == "per_rank_seed" else cfg


def train_single_process(
    cfg: GptConfig, steps: int, device: torch.device | str = "cpu"
) -> dict[str, torch.Tensor]:
    """The golden reference: one process, the whole global batch, `steps` AdamW steps; parameters after
    them."""
    model = build_model(cfg, device)
    optimizer = make_optimizer(model.parameters())
    for step in range(steps):
        tokens, targets = synthetic_batch(cfg, step, device=device)
        train_step(model, optimizer, tokens, targets)
    return {name: p.detach().clone() for name, p in model.named_parameters()}


def wrap_ddp(
    model: nn.Module, device: torch.device, group: dist.ProcessGroup | None = None, **ddp_kwargs
) -> nn.Module:
    """DistributedDataParallel over `group` (the world when None); it broadcasts rank 0's weights first."""
    from torch.nn.parallel import DistributedDataParallel

    ids = [device.index] if device.type == "cuda" else None
    return DistributedDataParallel(model, device_ids=ids, process_group=group, **ddp_kwargs)


def _local_nbytes(t: torch.Tensor) -> int:
    from torch.distributed.tensor import DTensor

    local = t.to_local() if isinstance(t, DTensor) else t
    return local.numel() * local.element_size()


def state_bytes(model: nn.Module, optimizer: torch.optim.Optimizer) -> dict[str, int]:
    """Bytes of model state this rank holds: its parameters, gradients and optimizer state (local shards
    only).

    ZeroRedundancyOptimizer keeps its shard's state in `.optim`; FSDP2 parameters, gradients and
    state are DTensors whose local shard is what this rank stores. Shared tensors count once.
    """
    seen: set[int] = set()

    def count(tensors: Iterable[torch.Tensor]) -> int:
        total = 0
        for t in tensors:
            if t is None or id(t) in seen:
                continue
            seen.add(id(t))
            total += _local_nbytes(t)
        return total

    params = list(model.parameters())
    inner = getattr(optimizer, "optim", optimizer)
    opt_tensors = [
        v
        for state in inner.state.values()
        for v in state.values()
        if isinstance(v, torch.Tensor) and v.dim() > 0
    ]
    return {"params": count(params), "grads": count(p.grad for p in params), "optimizer": count(opt_tensors)}
