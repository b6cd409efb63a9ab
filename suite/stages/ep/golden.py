"""The ep stage's golden comparison: the expert-parallel mixture of experts against the single-process
one on the same weights and tokens — which tokens each expert received (exactly), the output, and the
gradients of the input, the experts and the router (elementwise) — plus the load it saw.

    result = ep_case(w, shape, seed, skew, group)     # EpResult: errors, token-set mismatches, load

Every rank builds the same weights and all P·T tokens (seeded), runs the reference on all of them and
the expert-parallel layer on its own T, and backpropagates Σ y·g with seeded g. The router is
replicated, so its gradient is the sum over ranks (an all-reduce), as data parallelism would make it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.distributed as dist

from suite.stages.ep.moe_layer import MoeShape, moe_expert_parallel, moe_single_process, moe_weights
from suite.stages.ep.moe_routing import route, skew_bias
from suite.workloads.golden import group_max, max_abs_error

QUANTITIES = ("output", "dx", "dw1", "dw2", "drouter")


@dataclass
class EpResult:
    errors: dict[str, float]
    token_set_mismatches: int
    """Σ over experts of |tokens received △ tokens the reference sent it|: 0 when routing is right."""
    assignments: int
    """Assignments the experts received in all (the reference's count: the comparison is not empty)."""
    dropped: int
    dropped_reference: int
    routed_per_expert: list[int] = field(default_factory=list)
    kept_per_expert: list[int] = field(default_factory=list)
    received_per_rank: list[int] = field(default_factory=list)


def _sum(value: int, group, device) -> int:
    t = torch.tensor([value], dtype=torch.long, device=device)
    dist.all_reduce(t, group=group)
    return int(t.item())


def _gather(values: list[int], group, device) -> list[int]:
    """Every rank's list, concatenated in rank order (an all_gather)."""
    n = dist.get_world_size(group)
    t = torch.tensor(values, dtype=torch.long, device=device)
    out = [torch.empty_like(t) for _ in range(n)]
    dist.all_gather(out, t, group=group)
    return [int(v) for part in out for v in part.tolist()]


def ep_case(device, shape: MoeShape, seed: int, skew: float, group, mistake: str | None = None) -> EpResult:
    me, n = dist.get_rank(group), dist.get_world_size(group)
    per_rank = shape.experts // n
    weights = moe_weights(shape, seed, device)
    gen = torch.Generator().manual_seed(seed + 1)
    x_all = torch.randn(n * shape.tokens, shape.hidden, generator=gen).to(device)
    g_all = torch.randn(n * shape.tokens, shape.hidden, generator=gen).to(device)
    bias = skew_bias(shape.experts, skew).to(device) if skew else None
    mine = slice(me * shape.tokens, (me + 1) * shape.tokens)
    experts_here = slice(me * per_rank, (me + 1) * per_rank)

    ref = {k: v.clone().requires_grad_(True) for k, v in weights.items()}
    x_ref = x_all.clone().requires_grad_(True)
    y_ref, seen_ref, dropped_ref = moe_single_process(x_ref, ref, shape, bias, groups=n)
    (y_ref * g_all).sum().backward()

    router = (
        moe_weights(shape, seed + me, device)["router"]
        if mistake == "router_unsynchronised"
        else weights["router"]
    )
    local = {
        "router": router.clone().requires_grad_(True),
        "w1": weights["w1"][experts_here].clone().requires_grad_(True),
        "w2": weights["w2"][experts_here].clone().requires_grad_(True),
    }
    x = x_all[mine].clone().requires_grad_(True)
    y, seen, dropped, (send, recv) = moe_expert_parallel(x, local, shape, group, bias, mistake)
    (y * g_all[mine]).sum().backward()
    router_grad = local["router"].grad.clone()
    dist.all_reduce(router_grad, group=group)

    errors = {
        "output": max_abs_error(y, y_ref[mine]),
        "dx": max_abs_error(x.grad, x_ref.grad[mine]),
        "dw1": max_abs_error(local["w1"].grad, ref["w1"].grad[experts_here]),
        "dw2": max_abs_error(local["w2"].grad, ref["w2"].grad[experts_here]),
        "drouter": max_abs_error(router_grad, ref["router"].grad),
    }
    mismatches = sum(len(set(seen[e]) ^ set(seen_ref[e])) for e in seen)
    routed = torch.bincount(
        route(x.detach(), local["router"].detach(), shape.top_k, bias)[0].reshape(-1), minlength=shape.experts
    )
    dist.all_reduce(routed, group=group)
    return EpResult(
        errors={q: group_max(v, group) for q, v in errors.items()},
        token_set_mismatches=_sum(mismatches, group, device),
        assignments=sum(len(t) for t in seen_ref.values()),
        dropped=_sum(dropped, group, device),
        dropped_reference=dropped_ref,
        routed_per_expert=routed.tolist(),
        kept_per_expert=_gather([len(seen[e]) for e in sorted(seen)], group, device),
        received_per_rank=_gather([sum(recv)], group, device),
    )
