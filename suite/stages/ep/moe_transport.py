"""Moving tokens between ranks for expert parallelism: the variable-size all-to-all, its split sizes,
and what a mismatched one delivers.

    recv_counts = exchange_counts(send_counts, group)                    # first: who sends me how many
    got = variable_all_to_all(rows, recv_counts, send_counts, group)     # autograd: backward is the reverse

gloo aborts the process (SIGABRT) when the two sides of an all_to_all_single disagree on a size, and
NCCL hangs or delivers garbage. `mismatched_all_to_all` shows the garbage safely for the mistake tests:
every pair exchanges a slot of the largest size either side names, the sender packs what its splits
say and the receiver unpacks what its own splits say (zeros where nothing was sent, rows lost where more
was sent) — what a receiver sees that never learnt the real sizes.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch.distributed._functional_collectives import all_to_all_single_autograd


def exchange_counts(send_counts: torch.Tensor, group) -> torch.Tensor:
    recv = torch.empty_like(send_counts)
    dist.all_to_all_single(recv, send_counts, group=group)
    return recv


def variable_all_to_all(
    rows: torch.Tensor, recv_counts: list[int], send_counts: list[int], group
) -> torch.Tensor:
    """rows split by send_counts go to each rank; recv_counts rows arrive from each (differentiable)."""
    if rows.requires_grad:
        got = all_to_all_single_autograd(rows.contiguous(), recv_counts, send_counts, group)
        return got * 1  # waits for the collective
    out = rows.new_empty((sum(recv_counts), *rows.shape[1:]))
    dist.all_to_all_single(out, rows.contiguous(), recv_counts, send_counts, group=group)
    return out


def fit_rows(rows: torch.Tensor, n: int) -> torch.Tensor:
    """rows truncated or zero-padded to n rows."""
    if rows.shape[0] >= n:
        return rows[:n]
    return torch.cat([rows, rows.new_zeros((n - rows.shape[0], *rows.shape[1:]))])


def mismatched_all_to_all(
    rows: torch.Tensor, recv_counts: list[int], send_counts: list[int], group
) -> torch.Tensor:
    """What arrives when the sender splits by send_counts and the receiver by its own recv_counts, which the
    other side never agreed to (the mistakes' transport; equal to variable_all_to_all when they agree)."""
    n = dist.get_world_size(group)
    slot = torch.tensor([max(max(send_counts), max(recv_counts), 1)], device=rows.device)
    dist.all_reduce(slot, op=dist.ReduceOp.MAX, group=group)
    slot = int(slot.item())
    chunks = fit_rows(rows, sum(send_counts)).split(send_counts)
    packed = torch.stack([fit_rows(c, slot) for c in chunks])  # [P, slot, …]
    if packed.requires_grad:
        got = all_to_all_single_autograd(packed.flatten(0, 1).contiguous(), None, None, group) * 1
    else:
        got = torch.empty_like(packed.flatten(0, 1))
        dist.all_to_all_single(got, packed.flatten(0, 1).contiguous(), group=group)
    got = got.reshape(n, slot, *rows.shape[1:])
    return torch.cat([got[i, : recv_counts[i]] for i in range(n)])
