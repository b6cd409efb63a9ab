"""torch's own context parallelism (`torch.distributed.tensor.experimental.context_parallel`, CUDA only)
checked against the same single-process reference as the hand-written ring and Ulysses.

    errors = torch_cp_errors(inputs, mesh, causal=True)     # {"output": …, "dq": …, "dk": …, "dv": …}

context_parallel() shards the buffers in place along the sequence (load-balanced for causal masks) and
replaces the SDPA kernels with its ring inside the block; context_parallel_unshard() puts the results
back in sequence order, so they compare with the full reference directly. torch's SDPA returns no LSE:
its gradient path is not checked here (g only, h = 0). On CPU the public API is not ring attention
(FACTS.md): the cp stage calls this only on cuda.
"""

from __future__ import annotations

import contextlib

import torch
import torch.nn.functional as F

from suite.stages.cp.attention_blocks import block_attention
from suite.workloads.golden import group_max, max_abs_error

QUANTITIES = ("output", "dq", "dk", "dv")


def torch_cp_errors(inputs: dict[str, torch.Tensor], mesh, causal: bool) -> dict[str, float]:
    from torch.distributed.tensor.experimental import context_parallel

    # where torch's CP tutorial takes it
    from torch.distributed.tensor.experimental._attention import (
        context_parallel_unshard,
    )
    from torch.nn.attention import SDPBackend, sdpa_kernel

    q0, k0, v0 = (inputs[n].detach().clone().requires_grad_(True) for n in "qkv")
    want_out, _ = block_attention(q0, k0, v0, causal=causal)
    (want_out * inputs["g"]).sum().backward()
    want = {"output": want_out.detach(), "dq": q0.grad, "dk": k0.grad, "dv": v0.grad}

    buffers = [inputs[n].detach().clone() for n in ("q", "k", "v", "g")]
    # no_restore: putting the full values back in place would write into leaves that now require grad.
    with context_parallel(
        mesh, buffers=buffers, buffer_seq_dims=[2, 2, 2, 2], no_restore_buffers=set(buffers)
    ):
        q, k, v = (b.requires_grad_(True) for b in buffers[:3])
        # On CUDA the memory-efficient kernel: it takes float32 (flash does not) and context_parallel()
        # intercepts it. On CPU torch refuses here (no sharding strategy for the CPU kernels: FACTS.md).
        with sdpa_kernel([SDPBackend.EFFICIENT_ATTENTION]) if q.is_cuda else contextlib.nullcontext():
            out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            (out * buffers[3]).sum().backward()
    got = context_parallel_unshard(mesh, [out.detach(), q.grad, k.grad, v.grad], [2, 2, 2, 2])
    group = mesh.get_group()
    return {name: group_max(max_abs_error(g, want[name]), group) for name, g in zip(QUANTITIES, got)}
