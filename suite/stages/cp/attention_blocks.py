"""Attention with its log-sum-exp, one block at a time: the piece ring attention and Ulysses share with
their single-process reference.

    out, lse = block_attention(q, k, v, causal=True, q_start=0, k_start=0)    # q, k, v: [B, H, S, D]
    out, lse = merge_partials(out, lse, out_b, lse_b)                          # two blocks of keys, exactly

Written with explicit matmuls (not a fused kernel) so that autograd differentiates the LSE too: the
ring's merge needs ∂/∂lse, which torch's fused SDPA kernels do not return. `q_start`/`k_start` are the
global positions of the block's first query and key: a causal mask compares global positions, so a
shard that is not the first must offset them (forgetting to is one of the mistakes the cp stage checks).
"""

from __future__ import annotations

import math

import torch


def block_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool, q_start: int = 0, k_start: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    """softmax(q kᵀ/√D) v over this block of keys, and lse = log Σ exp(scores) per query (float32)."""
    scores = torch.matmul(q, k.transpose(-1, -2)).float() * (1.0 / math.sqrt(q.shape[-1]))
    if causal:
        q_pos = torch.arange(q_start, q_start + q.shape[-2], device=q.device)
        k_pos = torch.arange(k_start, k_start + k.shape[-2], device=q.device)
        scores = scores.masked_fill(k_pos[None, :] > q_pos[:, None], float("-inf"))
    lse = torch.logsumexp(scores, dim=-1)
    probs = torch.exp(scores - lse.unsqueeze(-1)).to(v.dtype)
    return torch.matmul(probs, v), lse


def merge_partials(
    out: torch.Tensor, lse: torch.Tensor, out_b: torch.Tensor, lse_b: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention over the union of two disjoint key blocks from each block's own (out, lse):
    lse' = log(e^lse + e^lse_b), out' = e^(lse−lse')·out + e^(lse_b−lse')·out_b."""
    merged = torch.logaddexp(lse, lse_b)
    out = (
        torch.exp(lse - merged).unsqueeze(-1) * out.float()
        + torch.exp(lse_b - merged).unsqueeze(-1) * out_b.float()
    ).to(out.dtype)
    return out, merged


def averaged_partials(
    out: torch.Tensor, lse: torch.Tensor, out_b: torch.Tensor, lse_b: torch.Tensor, blocks_so_far: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """The `lse_average` mistake: partial outputs and LSEs averaged as if every block weighed the same."""
    n = blocks_so_far
    return (out * n + out_b) / (n + 1), (lse * n + lse_b) / (n + 1)
