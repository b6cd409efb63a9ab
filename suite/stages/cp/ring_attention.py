"""Ring attention: each rank holds one contiguous sequence shard of Q, K and V; K/V travel once around
the ring (batch_isend_irecv to rank+1, from rank−1) while each rank attends its queries to the block it
holds, and the partial results are merged by log-sum-exp (attention_blocks.merge_partials).

    out, lse = ring_attention(q, k, v, group, causal=True, ledger=ledger)     # shards [B, H, S/P, D]

The next rotation is started before the current block is computed, so on GPUs the transfer can hide
behind the block's matmuls (the cp stage measures whether it does). Under a causal mask a block from a
later shard is skipped (every key lies after every query), but still passed on. Backward is autograd's:
the rotation is an autograd Function whose backward sends the K/V gradients the opposite way round.

Deliberate mistakes (tests): `lse_average` (partials averaged, not LSE-weighted), `mask_offset` (every
block masked as if it were the diagonal one: positions counted from 0 in each shard).
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from suite.stages.cp.attention_blocks import averaged_partials, block_attention, merge_partials

MISTAKES = ("lse_average", "mask_offset")


class CommLedger:
    """Bytes this rank sent, counted where they are sent (the cp stage compares them with the formula)."""

    def __init__(self) -> None:
        self.bytes_sent = 0

    def add(self, *tensors: torch.Tensor) -> None:
        self.bytes_sent += sum(t.numel() * t.element_size() for t in tensors)


class _Rotation(torch.autograd.Function):
    """Start sending `tensors` to the next rank and receiving the previous rank's; the caller waits on
    `pending` before reading the result. Backward: the gradients go back to the previous rank."""

    @staticmethod
    def forward(ctx, group, pending: list, ledger, *tensors):
        ctx.group = group
        received = tuple(torch.empty_like(t) for t in tensors)
        pending.extend(_exchange(group, tensors, received, step=+1))
        if ledger is not None:
            ledger.add(*tensors)
        return received

    @staticmethod
    def backward(ctx, *grads):
        grads = tuple(g.contiguous() for g in grads)
        received = tuple(torch.empty_like(g) for g in grads)
        for work in _exchange(ctx.group, grads, received, step=-1):
            work.wait()
        return (None, None, None, *received)


class _KeepInGraph(torch.autograd.Function):
    """Returns `out` unchanged, but makes `held` part of the backward graph (with zero gradient).

    A rank that skips a block (causal: keys after all its queries) would otherwise leave that
    rotation out of its backward, and its neighbours would wait forever for the gradient it passes on."""

    @staticmethod
    def forward(ctx, out, *held):
        ctx.shapes = [(t.shape, t.dtype, t.device) for t in held]
        return out.view_as(out)

    @staticmethod
    def backward(ctx, grad, *_):
        return (grad, *(torch.zeros(s, dtype=d, device=v) for s, d, v in ctx.shapes))


def _exchange(group, send: tuple, recv: tuple, step: int) -> list:
    """Send to the rank `step` ahead in the group, receive from the one `step` behind (global ranks)."""
    me, n = dist.get_rank(group), dist.get_world_size(group)
    to = dist.get_global_rank(group, (me + step) % n)
    frm = dist.get_global_rank(group, (me - step) % n)
    ops = [dist.P2POp(dist.isend, t, to, group) for t in send]
    ops += [dist.P2POp(dist.irecv, t, frm, group) for t in recv]
    return dist.batch_isend_irecv(ops)


def ring_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    group,
    *,
    causal: bool,
    ledger: CommLedger | None = None,
    rotate: bool = True,
    compute: bool = True,
    mistake: str | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """This rank's output and LSE shards of attention over the whole sequence.

    rotate=False computes every block on the rank's own K/V (the compute alone, for the overlap
    measurement); compute=False only rotates (the communication alone); both change the result.
    """
    me, n = dist.get_rank(group), dist.get_world_size(group)
    length = q.shape[-2]
    out = lse = None
    blocks = 0
    held = (k.contiguous(), v.contiguous())
    for step in range(n):
        pending: list = []
        nxt = _Rotation.apply(group, pending, ledger, *held) if rotate and step < n - 1 else None
        source = (me - step) % n  # whose shard of K/V this rank holds now
        if compute and not (causal and source > me):
            q_start, k_start = (0, 0) if mistake == "mask_offset" else (me * length, source * length)
            out_b, lse_b = block_attention(
                q,
                held[0],
                held[1],
                causal=causal and (source == me or mistake == "mask_offset"),
                q_start=q_start,
                k_start=k_start,
            )
            if out is None:
                out, lse = out_b, lse_b
            elif mistake == "lse_average":
                out, lse = averaged_partials(out, lse, out_b, lse_b, blocks)
            else:
                out, lse = merge_partials(out, lse, out_b, lse_b)
            blocks += 1
        elif out is not None and step > 0:
            out = _KeepInGraph.apply(out, *held)
        for work in pending:
            work.wait()
        if nxt is not None:
            held = nxt
    if out is None:  # compute=False: the communication alone
        out, lse = torch.zeros_like(q), torch.zeros(q.shape[:-1], device=q.device)
    return out, lse
