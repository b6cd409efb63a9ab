"""Ulysses (DeepSpeed's sequence parallelism): an all-to-all turns sequence shards of every head into
the whole sequence of H/P heads, each rank runs full attention on its heads, and a second all-to-all
turns the result back into sequence shards.

    out, lse = ulysses_attention(q, k, v, group, causal=True, ledger=ledger)  # shards [B, H, S/P, D]

The all-to-alls are an autograd Function over dist.all_to_all_single whose backward is the same even
all-to-all of the gradient (torch's `all_to_all_single_autograd` would do, but importing it pulls in dynamo
and DTensor: ~1.8 s of CPU per rank, measured on gloo, for a launch that needs neither). The layout sent is
[P, B, H/P, S/P, D]: chunk j is head group j, and what arrives from rank j is sequence block j, so the
received [P, …] axis is put back next to S/P before flattening. Deliberate mistake (tests): `a2a_transpose` —
the return all-to-all splits the sequence as [S/P, P] instead of [P, S/P], so each rank gets every P-th
position instead of its own block.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from suite.stages.cp.attention_blocks import block_attention
from suite.stages.cp.ring_attention import CommLedger

MISTAKES = ("a2a_transpose",)


class _EvenAllToAll(torch.autograd.Function):
    """Chunk j of dim 0 goes to rank j, chunk j of the result came from rank j; the gradient takes the same
    road back, which for even chunks is the same all-to-all."""

    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        out = torch.empty_like(x)
        dist.all_to_all_single(out, x, group=group)
        return out

    @staticmethod
    def backward(ctx, grad):
        grad = grad.contiguous()  # before empty_like, which would copy a transposed gradient's strides
        out = torch.empty_like(grad)
        dist.all_to_all_single(out, grad, group=ctx.group)
        return out, None


def _all_to_all(x: torch.Tensor, group, ledger: CommLedger | None) -> torch.Tensor:
    """Even all-to-all over dim 0 (of size P); the ledger counts the chunks that leave this rank."""
    n = dist.get_world_size(group)
    if ledger is not None:
        ledger.bytes_sent += x.numel() * x.element_size() * (n - 1) // n
    return _EvenAllToAll.apply(x.contiguous(), group)


def sequence_to_heads(x: torch.Tensor, group, ledger=None) -> torch.Tensor:
    """[B, H, S/P, D] sequence shard → [B, H/P, S, D]: the whole sequence of this rank's head group."""
    n = dist.get_world_size(group)
    b, h, length, d = x.shape
    send = x.reshape(b, n, h // n, length, d).transpose(0, 1)  # [P (head group), B, H/P, S/P, D]
    got = _all_to_all(send, group, ledger)  # [P (sequence block), B, H/P, S/P, D]
    return got.permute(1, 2, 0, 3, 4).reshape(b, h // n, n * length, d)


def heads_to_sequence(y: torch.Tensor, group, ledger=None, mistake: str | None = None) -> torch.Tensor:
    """[B, H/P, S, D] → [B, H, S/P, D]: back to this rank's sequence shard of every head."""
    n = dist.get_world_size(group)
    b, hp, full, d = y.shape
    length = full // n
    if mistake == "a2a_transpose":
        send = y.reshape(b, hp, length, n, d).permute(3, 0, 1, 2, 4)
    else:
        send = y.reshape(b, hp, n, length, d).permute(2, 0, 1, 3, 4)  # [P (sequence block), B, H/P, S/P, D]
    got = _all_to_all(send, group, ledger)  # [P (head group), B, H/P, S/P, D]
    return got.transpose(0, 1).reshape(b, n * hp, length, d)


def ulysses_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    group,
    *,
    causal: bool,
    ledger: CommLedger | None = None,
    mistake: str | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """This rank's output and LSE shards of attention over the whole sequence (H must divide by P)."""
    n = dist.get_world_size(group)
    if q.shape[1] % n:
        raise ValueError(
            f"Ulysses needs the heads ({q.shape[1]}) divisible by CP = {n}: pick cp.heads accordingly"
        )
    qh, kh, vh = (sequence_to_heads(t, group, ledger) for t in (q, k, v))
    out, lse = block_attention(qh, kh, vh, causal=causal)
    out = heads_to_sequence(out, group, ledger, mistake)
    lse = heads_to_sequence(lse.unsqueeze(-1), group, ledger, mistake).squeeze(-1)
    return out, lse
