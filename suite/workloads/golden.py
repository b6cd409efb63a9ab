"""Golden comparisons: a partitioned result against what one process computes, elementwise.

Every partitioned run (TP, DP, ZeRO) is checked before its timings are believed. The checks run
in float32 whatever dtype the timings use (CHECK_DTYPE): a partitioning mistake moves values by
1e-3 and more, while float32 reduction-order noise stays near 1e-7 (measured on gloo: TP forward
2.4e-7, three AdamW steps under FSDP2 3.7e-8). The tolerance is stated per dtype so a check run
in another dtype is still judged sensibly.
"""

from __future__ import annotations

import dataclasses
import math
import sys
from typing import Iterable

import torch
import torch.distributed as dist

from suite.config import GptConfig

# part of this module's interface
from suite.costmodel.tolerance import CHECK_DTYPE


def check_config(cfg: GptConfig) -> GptConfig:
    """The model configuration the golden comparisons use: the profile's model in CHECK_DTYPE."""
    return dataclasses.replace(cfg, dtype=CHECK_DTYPE)


def max_abs_error(got: torch.Tensor, want: torch.Tensor) -> float:
    """max |got − want| over every element, in float64; inf when the element counts differ.

    A result laid out differently but holding the same number of elements (a batch shard taken for
    a sequence shard) is compared after reshaping to `want`'s shape, as a loss would consume it.
    """
    got, want = _local(got), _local(want)
    if got.numel() != want.numel():
        return math.inf
    if got.numel() == 0:
        return 0.0
    diff = (got.detach().reshape(want.shape).double() - want.detach().double()).abs().max().item()
    return diff if math.isfinite(diff) else math.inf


def max_abs_error_many(pairs: Iterable[tuple[torch.Tensor, torch.Tensor]]) -> float:
    """The largest max_abs_error over (got, want) pairs (0.0 for none)."""
    return max((max_abs_error(g, w) for g, w in pairs), default=0.0)


def full(tensor: torch.Tensor) -> torch.Tensor:
    """A DTensor gathered to its full value (a collective: every rank of its mesh must call it), else
    itself."""
    return tensor.full_tensor() if _is_dtensor(tensor) else tensor


def _local(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.to_local() if _is_dtensor(tensor) else tensor


def _is_dtensor(tensor: torch.Tensor) -> bool:
    # A DTensor exists only once torch.distributed.tensor is imported; importing it just to ask costs
    # ~0.9 s of CPU per rank (measured on gloo), which the drills comparing plain tensors need not pay.
    module = sys.modules.get("torch.distributed.tensor")
    return module is not None and isinstance(tensor, module.DTensor)


def group_max(value: float, group: dist.ProcessGroup | None = None) -> float:
    """The maximum of `value` over the ranks of `group` (an all-reduce): a mistake on any rank shows."""
    if not dist.is_initialized():
        return value
    backend = dist.get_backend(group)
    device = torch.device("cuda", torch.cuda.current_device()) if backend == "nccl" else torch.device("cpu")
    t = torch.tensor([value if math.isfinite(value) else 1e300], dtype=torch.float64, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX, group=group)
    out = t.item()
    return math.inf if out >= 1e300 else out
