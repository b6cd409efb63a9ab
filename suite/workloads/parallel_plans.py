"""Tensor parallelism for the GPT model with torch's own DTensor styles, and the mistakes the checks must
catch.

    mesh = tp_submesh("cpu", world=4, degree=2)              # ranks 0-1, 2-3: two TP groups
    model = apply_tensor_parallel(build_model(cfg), mesh)   # sequence parallel by default

The plan (Megatron-LM's, as torchtitan applies it): in each block the attention's q, k, v and the
MLP's up projection are column-parallel (each rank holds heads/tp heads and 4d/tp MLP columns),
attention's o and the MLP's down projection row-parallel (their partial sums are reduced). With
sequence parallelism the LayerNorms and the residual stream between blocks hold a contiguous
1/tp of the sequence (Shard(1)): the embedding's partial sums are reduce-scattered onto it, each
attention/MLP input is all-gathered back to the full sequence, and each row-parallel output is
reduce-scattered onto it again. The head is column-parallel over the vocabulary and its logits
gathered (Replicate), so the loss sees what one process sees.

Deliberate mistakes (`mistake=`), each a real partitioning bug that runs without an error:
  missing_reduction  row-parallel outputs handed on unreduced (a skipped all-reduce; under
                     sequence parallelism a reduce-scatter that scatters but never sums)
  wrong_dim          the embedding's output sharded on the batch (dim 0) where the sequence-parallel
                     region expects the sequence (dim 1): rows of the batch are stitched into one sequence
  per_rank_seed      weights and batch drawn from seed + rank (torch scatters rank 0's weights, the
                     batch stays wrong)
and, for sequence-sharded attention, `follow_shard=False`: RoPE positions counted from 0 on
every shard instead of from the shard's first token.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.distributed.tensor import Replicate, Shard
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    PrepareModuleInput,
    RowwiseParallel,
    SequenceParallel,
    parallelize_module,
)

from suite.workloads.gpt import GPT, Attention, apply_rope, rope_tables

# the per_rank_seed mistake, shared with data parallelism

TP_MISTAKES = ("missing_reduction", "wrong_dim", "per_rank_seed")


def tp_submesh(device_type: str, world: int, degree: int) -> DeviceMesh:
    """The TP sub-mesh of this rank: ranks split into world/degree groups of `degree` consecutive ranks.

    Every rank must call it (it creates process groups); rank r lands in group r // degree.
    """
    if world % degree:
        raise ValueError(
            f"TP degree {degree} does not divide the world of {world} ranks: pick degrees that divide --nproc"
        )
    mesh = init_device_mesh(device_type, (world // degree, degree), mesh_dim_names=("replica", "tp"))
    return mesh["tp"]


class _RowwiseWithoutReduction(RowwiseParallel):
    """RowwiseParallel whose partial sums are never summed: the `missing_reduction` mistake."""

    @staticmethod
    def _prepare_output_fn(output_layouts, use_local_output, mod, outputs, device_mesh):
        partial = outputs.to_local()
        placement = output_layouts[0] if isinstance(output_layouts, (tuple, list)) else output_layouts
        # scatter without the reduce: this rank's slice of its own partial sum
        if isinstance(placement, Shard):
            rank = device_mesh.get_local_rank()
            partial = partial.chunk(device_mesh.size(), dim=placement.dim)[rank].contiguous()
        return partial


def tp_plan(model: GPT, *, sequence_parallel: bool = True, mistake: str | None = None) -> dict:
    """The parallelize_module plan for `model` (module path → ParallelStyle)."""
    if mistake not in (None, *TP_MISTAKES):
        raise ValueError(f"unknown TP mistake {mistake!r}: one of {', '.join(TP_MISTAKES)}")
    if model.cfg.tied_head:
        raise ValueError(
            "tensor parallelism shards the embedding and the head separately: set tied_head=False"
        )
    if mistake == "wrong_dim" and not sequence_parallel:
        raise ValueError("the wrong_dim mistake is a sequence-parallel one: use sequence_parallel=True")
    rowwise = _RowwiseWithoutReduction if mistake == "missing_reduction" else RowwiseParallel
    if sequence_parallel:
        residual = Shard(1)  # the residual stream between blocks: a contiguous slice of the sequence
        embed_out = Shard(0) if mistake == "wrong_dim" else residual
        plan = {
            "embed": RowwiseParallel(input_layouts=Replicate(), output_layouts=embed_out),
            "norm": SequenceParallel(),
            "head": ColwiseParallel(input_layouts=residual, output_layouts=Replicate()),
        }
        for i in range(len(model.blocks)):
            plan.update(
                {
                    f"blocks.{i}.attn_norm": SequenceParallel(),
                    f"blocks.{i}.attn": PrepareModuleInput(
                        input_layouts=(residual,), desired_input_layouts=(Replicate(),)
                    ),
                    f"blocks.{i}.attn.q": ColwiseParallel(),
                    f"blocks.{i}.attn.k": ColwiseParallel(),
                    f"blocks.{i}.attn.v": ColwiseParallel(),
                    f"blocks.{i}.attn.o": rowwise(output_layouts=residual),
                    f"blocks.{i}.mlp_norm": SequenceParallel(),
                    f"blocks.{i}.mlp": PrepareModuleInput(
                        input_layouts=(residual,), desired_input_layouts=(Replicate(),)
                    ),
                    f"blocks.{i}.mlp.up": ColwiseParallel(),
                    f"blocks.{i}.mlp.down": rowwise(output_layouts=residual),
                }
            )
        return plan
    plan = {
        "embed": RowwiseParallel(input_layouts=Replicate(), output_layouts=Replicate()),
        "head": ColwiseParallel(output_layouts=Replicate()),
    }
    for i in range(len(model.blocks)):
        plan.update(
            {
                f"blocks.{i}.attn.q": ColwiseParallel(),
                f"blocks.{i}.attn.k": ColwiseParallel(),
                f"blocks.{i}.attn.v": ColwiseParallel(),
                f"blocks.{i}.attn.o": rowwise(),
                f"blocks.{i}.mlp.up": ColwiseParallel(),
                f"blocks.{i}.mlp.down": rowwise(),
            }
        )
    return plan


def apply_tensor_parallel(
    model: GPT, mesh: DeviceMesh, *, sequence_parallel: bool = True, mistake: str | None = None
) -> GPT:
    """Shard `model` in place over the 1-D `mesh` with tp_plan; returns it."""
    if sequence_parallel and model.cfg.seq_len % mesh.size():
        raise ValueError(
            f"sequence parallelism needs seq_len {model.cfg.seq_len} divisible by TP degree {mesh.size()}"
        )
    return parallelize_module(
        model, mesh, tp_plan(model, sequence_parallel=sequence_parallel, mistake=mistake)
    )


# ---------------------------------------------------------------- sequence-sharded attention


def sequence_sharded_attention(
    attn: Attention, x_shard: torch.Tensor, group: dist.ProcessGroup, *, follow_shard: bool = True
) -> torch.Tensor:
    """Causal attention over a sequence split into contiguous shards, one per rank of `group`.

    This rank holds tokens [start, start + chunk) of x; it projects its own q, k, v, rotates
    them by RoPE at its tokens' absolute positions, all-gathers every shard's k and v
    (autograd-aware), and attends its queries to every key at or before each query's position.
    `follow_shard=False` is the mistake: positions 0..chunk−1 on every shard.
    """
    # torch's own autograd-aware gather (its backward reduce-scatters the gradient); concatenates along dim 2.
    from torch.distributed._functional_collectives import all_gather_single

    rank, n = dist.get_rank(group), dist.get_world_size(group)
    batch, chunk, _ = x_shard.shape
    start = rank * chunk
    true_positions = torch.arange(start, start + chunk, device=x_shard.device)
    rope_positions = true_positions if follow_shard else torch.arange(chunk, device=x_shard.device)

    def heads(t: torch.Tensor) -> torch.Tensor:
        return t.view(batch, chunk, -1, attn.head_dim).transpose(1, 2)

    q, k, v = heads(attn.q(x_shard)), heads(attn.k(x_shard)), heads(attn.v(x_shard))
    cos, sin = rope_tables(chunk, attn.head_dim, rope_positions)
    q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
    k_all = all_gather_single(k.contiguous(), gather_dim=2, group=group)
    v_all = all_gather_single(v.contiguous(), gather_dim=2, group=group)
    key_positions = torch.arange(n * chunk, device=x_shard.device)
    causal = key_positions[None, :] <= true_positions[:, None]  # (chunk, seq): True = may attend
    y = F.scaled_dot_product_attention(q, k_all, v_all, attn_mask=causal)
    return attn.o(y.transpose(1, 2).reshape(batch, chunk, -1))
