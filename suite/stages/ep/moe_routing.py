"""Top-k routing with a per-expert capacity: the rule the single-process mixture of experts and the
expert-parallel one both apply, so that they must send the same tokens to the same experts.

    experts, weights = route(x, router, top_k, bias)          # [T, k] expert ids, [T, k] renormalised gates
    kept = within_capacity(experts, n_experts, capacity)      # [T, k] bool: the assignment is not dropped

Capacity is counted per expert within one rank's T tokens (GShard's groups), first choices before
second choices, then in token order; capacity_of(0, …) means no limit.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F


def route(
    x: torch.Tensor, router: torch.Tensor, top_k: int, bias: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    logits = x @ router
    if bias is not None:
        logits = logits + bias
    gates, experts = F.softmax(logits, dim=-1).topk(top_k, dim=-1)
    return experts, gates / gates.sum(dim=-1, keepdim=True)


def capacity_of(capacity_factor: float, tokens: int, top_k: int, n_experts: int) -> int:
    """Assignments an expert accepts from one group of `tokens`: ⌈factor·tokens·k/E⌉; factor 0: all of
    them."""
    if capacity_factor <= 0:
        return tokens * top_k
    return math.ceil(capacity_factor * tokens * top_k / n_experts)


def within_capacity(experts: torch.Tensor, n_experts: int, capacity: int) -> torch.Tensor:
    tokens, k = experts.shape
    slot_major = experts.t().reshape(-1)  # every first choice, then every second choice
    onehot = F.one_hot(slot_major, n_experts)
    position = (onehot.cumsum(0) - 1).gather(1, slot_major[:, None]).squeeze(1)
    return (position < capacity).reshape(k, tokens).t()


def skew_bias(n_experts: int, skew: float) -> torch.Tensor:
    """A logit bias favouring low-numbered experts (0 for skew 0): the skewed router's case."""
    return skew * torch.linspace(1.0, 0.0, n_experts)
