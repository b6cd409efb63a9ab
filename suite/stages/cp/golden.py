"""The cp stage's golden comparison: a sequence split over a group, attended by ring attention or
Ulysses, against full attention in one process — output, log-sum-exp, and the gradients of q, k, v.

    errors = cp_errors(shape, group, "ring", causal=True)     # {"output": …, "lse": …, "dq": …, "dk": …,
                                                              # "dv": …}

Every rank builds the same full q, k, v (seeded), takes its contiguous sequence shard, and backpropagates
Σ out·g + Σ lse·h with seeded g and h, so the LSE's own gradient path (the ring's merge) is checked too.
Errors are max |partitioned − single process| over this rank's shard, then the maximum over the group.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist

from suite.stages.cp.attention_blocks import block_attention
from suite.stages.cp.ring_attention import CommLedger, ring_attention
from suite.stages.cp.ulysses import ulysses_attention
from suite.workloads.golden import group_max, max_abs_error

QUANTITIES = ("output", "lse", "dq", "dk", "dv")


@dataclass(frozen=True)
class AttentionShape:
    batch: int
    heads: int
    seq_len: int
    head_dim: int


def full_inputs(shape: AttentionShape, seed: int, device, dtype=torch.float32) -> dict[str, torch.Tensor]:
    """q, k, v and the upstream gradients g (of the output) and h (of the LSE): the same on every rank."""
    gen = torch.Generator().manual_seed(seed)
    b, h, s, d = shape.batch, shape.heads, shape.seq_len, shape.head_dim
    names = {"q": (b, h, s, d), "k": (b, h, s, d), "v": (b, h, s, d), "g": (b, h, s, d), "h": (b, h, s)}
    return {n: torch.randn(*dims, generator=gen).to(device=device, dtype=dtype) for n, dims in names.items()}


def reference(inputs: dict[str, torch.Tensor], causal: bool) -> dict[str, torch.Tensor]:
    """Full attention in this process: output, LSE and dq, dk, dv of Σ out·g + Σ lse·h."""
    q, k, v = (inputs[n].detach().clone().requires_grad_(True) for n in "qkv")
    out, lse = block_attention(q, k, v, causal=causal)
    ((out * inputs["g"]).sum() + (lse * inputs["h"]).sum()).backward()
    return {"output": out.detach(), "lse": lse.detach(), "dq": q.grad, "dk": k.grad, "dv": v.grad}


def partitioned(
    inputs: dict[str, torch.Tensor],
    group,
    algo: str,
    causal: bool,
    mistake: str | None = None,
    ledger: CommLedger | None = None,
) -> dict[str, torch.Tensor]:
    """This rank's shards of the same five quantities, computed by `algo` (ring or ulysses) over `group`."""
    me, n = dist.get_rank(group), dist.get_world_size(group)
    shard = {name: t.chunk(n, dim=2)[me] for name, t in inputs.items()}
    q, k, v = (shard[c].detach().clone().requires_grad_(True) for c in "qkv")
    attend = ring_attention if algo == "ring" else ulysses_attention
    out, lse = attend(q, k, v, group, causal=causal, ledger=ledger, mistake=mistake)
    ((out * shard["g"]).sum() + (lse * shard["h"]).sum()).backward()
    return {"output": out.detach(), "lse": lse.detach(), "dq": q.grad, "dk": k.grad, "dv": v.grad}


def shard_errors(got: dict[str, torch.Tensor], want: dict[str, torch.Tensor], group) -> dict[str, float]:
    """max |got − want's shard of this rank| per quantity, the maximum over the group."""
    me, n = dist.get_rank(group), dist.get_world_size(group)
    return {
        name: group_max(max_abs_error(got[name], want[name].chunk(n, dim=2)[me]), group)
        for name in QUANTITIES
    }


def cp_errors(
    inputs, ref, group, algo: str, causal: bool, mistake: str | None = None, ledger: CommLedger | None = None
) -> dict[str, float]:
    return shard_errors(partitioned(inputs, group, algo, causal, mistake, ledger), ref, group)
