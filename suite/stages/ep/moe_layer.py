"""A top-k routed mixture of experts, in one process and with its experts spread over ranks.

    weights = moe_weights(shape, seed, device)                       # router [d, E], w1 [E, d, f], w2 [E, f,
                                                                     # d]
    y, seen = moe_single_process(x, weights, shape, bias)            # every expert here; seen[e]: its tokens
    y, seen = moe_expert_parallel(x, local, shape, bias, group)      # this rank's experts; x: its own tokens

Expert e lives on rank e // (E/P). Each rank routes its own T tokens (the same router everywhere),
drops what exceeds an expert's capacity, sorts the kept assignments by expert, exchanges the split
sizes (all_to_all_single on the counts), dispatches the token rows with a variable all_to_all, runs
its experts, and combines with the reverse all_to_all (the splits swapped), weighting by the gates.
`seen` maps each expert to the sorted global ids (rank·T + t) of the tokens it processed.

Deliberate mistakes (tests): `splits_not_exchanged` (each receiver assumes it gets what it sends),
`combine_forward_splits` (the combine reuses the dispatch's splits), `router_unsynchronised` (each rank
seeds its router with seed + rank).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist

from suite.stages.ep.moe_routing import capacity_of, route, within_capacity
from suite.stages.ep.moe_transport import (
    exchange_counts,
    fit_rows,
    mismatched_all_to_all,
    variable_all_to_all,
)

MISTAKES = ("splits_not_exchanged", "combine_forward_splits", "router_unsynchronised")


@dataclass(frozen=True)
class MoeShape:
    tokens: int
    """Tokens per rank (one routing group)."""
    hidden: int
    ffn: int
    experts: int
    top_k: int
    capacity_factor: float


def moe_weights(shape: MoeShape, seed: int, device, dtype=torch.float32) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    d, f, e = shape.hidden, shape.ffn, shape.experts
    return {
        "router": torch.randn(d, e, generator=gen).to(device, dtype),
        "w1": (torch.randn(e, d, f, generator=gen) / d**0.5).to(device, dtype),
        "w2": (torch.randn(e, f, d, generator=gen) / f**0.5).to(device, dtype),
    }


def expert_mlp(rows: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor) -> torch.Tensor:
    return torch.relu(rows @ w1) @ w2


def kept_assignments(x, router, shape: MoeShape, bias):
    """(token index, expert, gate) of every kept assignment, sorted by expert (stable: token order within)."""
    experts, gates = route(x, router, shape.top_k, bias)
    kept = within_capacity(
        experts, shape.experts, capacity_of(shape.capacity_factor, x.shape[0], shape.top_k, shape.experts)
    )
    token = torch.arange(x.shape[0], device=x.device)[:, None].expand_as(experts)[kept]
    expert, gate = experts[kept], gates[kept]
    order = torch.argsort(expert, stable=True)
    return token[order], expert[order], gate[order], int((~kept).sum())


def moe_single_process(x: torch.Tensor, weights: dict, shape: MoeShape, bias=None, groups: int = 1):
    """The reference: x holds every rank's tokens ([groups·T, d]); capacity counted per group of T."""
    y = torch.zeros_like(x)
    seen: dict[int, list[int]] = {e: [] for e in range(shape.experts)}
    dropped = 0
    for g in range(groups):
        part = slice(g * shape.tokens, (g + 1) * shape.tokens)
        token, expert, gate, lost = kept_assignments(x[part], weights["router"], shape, bias)
        dropped += lost
        token = token + g * shape.tokens
        for e in range(shape.experts):
            mine = expert == e
            out = expert_mlp(x[token[mine]], weights["w1"][e], weights["w2"][e])
            y = y.index_add(0, token[mine], out * gate[mine, None])
            seen[e] += token[mine].tolist()
    return y, {e: sorted(t) for e, t in seen.items()}, dropped


def moe_expert_parallel(
    x: torch.Tensor, local: dict, shape: MoeShape, group, bias=None, mistake: str | None = None
):
    """This rank's output for its own tokens, what its experts saw, and how many assignments it dropped.
    `local`: the router (whole) and this rank's slices w1, w2 of [E/P, …]."""
    me, n = dist.get_rank(group), dist.get_world_size(group)
    per_rank = shape.experts // n
    token, expert, gate, dropped = kept_assignments(x, local["router"], shape, bias)
    send_counts = torch.bincount(expert // per_rank, minlength=n)
    if mistake == "splits_not_exchanged":
        recv_counts = send_counts.clone()  # assumed, never asked
    else:
        recv_counts = exchange_counts(send_counts, group)
    send, recv = send_counts.tolist(), recv_counts.tolist()
    move = mismatched_all_to_all if mistake == "splits_not_exchanged" else variable_all_to_all
    rows = move(x[token], recv, send, group)
    ids = move(torch.stack([expert, token + me * shape.tokens], dim=1), recv, send, group)
    local_expert = ids[:, 0] % per_rank  # rows that are not mine land on my first
    out = torch.zeros_like(rows)
    seen = {}
    for e in range(per_rank):
        mine = (local_expert == e).nonzero().squeeze(1)
        out = out.index_copy(0, mine, expert_mlp(rows[mine], local["w1"][e], local["w2"][e]))
        seen[me * per_rank + e] = sorted(ids[mine, 1].tolist())
    if mistake == "combine_forward_splits":
        back = fit_rows(mismatched_all_to_all(out, recv, send, group), sum(send))
    elif mistake == "splits_not_exchanged":
        back = mismatched_all_to_all(out, send, recv, group)
    else:
        back = variable_all_to_all(out, send, recv, group)  # the reverse: splits swapped
    y = torch.zeros_like(x).index_add(0, token, back * gate[:, None])
    return y, seen, dropped, (send, recv)
