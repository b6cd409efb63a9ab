"""Tensor parallelism at every degree in one launch: golden comparison first, then the timed training step.

    ctx.torchrun("suite.stages.tp.worker", [*model_args(cfg), "--degrees", "1,2,4"], tag="tp")

For each degree d > 1 the ranks form world/d TP groups of d consecutive ranks (a sub-mesh of a
(world/d, d) DeviceMesh). In every group:
  1. golden: a fresh float32 model, sharded with the sequence-parallel plan, runs one forward and
     one backward on the step-0 batch; its logits, loss and every parameter's gradient (gathered)
     are compared elementwise with one process's on the same weights and input. Then the
     sequence-sharded attention of block 0 against the unsharded one. Errors are maxima over the group.
  2. timing: the first group only (ranks 0..d−1; the others wait at a barrier, so the group has
     the machine to itself) builds the model in the profile's dtype, trains warm-up steps, times
     `steps` steps, then profiles a third as many again for the communication share.
d = 1 is the plain model on rank 0: the same step without DTensor.
"""

from __future__ import annotations

import time

import torch
import torch.distributed as dist

from suite.results import Row
from suite.workloads.golden import (
    CHECK_DTYPE,
    check_config,
    full,
    group_max,
    max_abs_error,
    max_abs_error_many,
)
from suite.workloads.gpt import Attention, build_model, loss_fn, synthetic_batch, torch_dtype
from suite.workloads.measure import communication_per_step, time_steps, typical
from suite.workloads.parallel_plans import (
    apply_tensor_parallel,
    sequence_sharded_attention,
    tp_submesh,
)
from suite.workloads.training import make_optimizer, seed_for_rank, train_step
from suite.workloads.worker import Worker, worker_session
from suite.workloads.worker_cli import degrees_from, log, mistakes_from, model_from, parser

STAGE = "tp"


def reference(cfg, device):
    """One process: logits, loss and gradients of the step-0 batch (float32)."""
    model = build_model(cfg, device)
    tokens, targets = synthetic_batch(cfg, 0, device=device)
    logits = model(tokens)
    loss = loss_fn(logits, targets)
    loss.backward()
    grads = {name: p.grad.detach().clone() for name, p in model.named_parameters()}
    return logits.detach(), loss.detach(), grads


def golden(w: Worker, cfg, mesh, ref, mistake: str | None = None) -> dict[str, float]:
    """Max |TP − single process| of logits, loss and gradients over the TP group of `mesh`."""
    ref_logits, ref_loss, ref_grads = ref
    rank_cfg = seed_for_rank(cfg, mesh.get_local_rank(), mistake)
    model = apply_tensor_parallel(build_model(rank_cfg, w.device), mesh, mistake=mistake)
    tokens, targets = synthetic_batch(rank_cfg, 0, device=w.device)
    logits = model(tokens)
    loss = loss_fn(logits, targets)
    loss.backward()
    grads = [(full(p.grad), ref_grads[name]) for name, p in model.named_parameters()]
    group = mesh.get_group()
    return {
        "logits": group_max(max_abs_error(logits, ref_logits), group),
        "loss": group_max(max_abs_error(loss, ref_loss), group),
        "grads": group_max(max_abs_error_many(grads), group),
    }


def sharded_attention_error(w: Worker, cfg, mesh, follow_shard: bool = True) -> float:
    """Attention over a sequence split across the group, against the unsharded attention on the same input.

    The attention gets nn.Linear's default initialisation (seeded, the same on every rank) and a
    unit-variance input: with the GPT's small init (std 0.02) every query attends almost uniformly
    and positions hardly matter, which would hide exactly the RoPE mistakes this check is for.
    """
    gen = torch.Generator().manual_seed(cfg.seed)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.seed)
        attn = Attention(cfg).to(device=w.device, dtype=torch_dtype(cfg.dtype))
    x = torch.randn(cfg.batch, cfg.seq_len, cfg.hidden, generator=gen).to(
        device=w.device, dtype=torch_dtype(cfg.dtype)
    )
    with torch.no_grad():
        want = attn(x)
        n, r = mesh.size(), mesh.get_local_rank()
        x_shard = x.chunk(n, dim=1)[r]
        got_shard = sequence_sharded_attention(attn, x_shard, mesh.get_group(), follow_shard=follow_shard)
        error = max_abs_error(got_shard, want.chunk(n, dim=1)[r])
    return group_max(error, mesh.get_group())


def timed(w: Worker, cfg, degree: int, mesh, steps: int, warmup: int) -> list[Row]:
    """Step time, throughput and communication share of TP=degree on ranks 0..degree−1."""
    profiled = max(1, steps // 3)  # a third of the timed steps again, under the profiler
    model = build_model(cfg, w.device)
    if mesh is not None:
        apply_tensor_parallel(model, mesh)
    optimizer = make_optimizer(model.parameters())
    batches = [synthetic_batch(cfg, s, device=w.device) for s in range(warmup + steps + profiled)]
    for s in range(warmup):
        train_step(model, optimizer, *batches[s])
    counter = iter(range(warmup, warmup + steps + profiled))
    step = lambda: train_step(model, optimizer, *batches[next(counter)])  # noqa: E731
    times = time_steps(step, steps, w.device)
    comm_s, profiled_s = communication_per_step(step, profiled, w.device) if mesh is not None else (0.0, 1.0)
    group = mesh.get_group() if mesh is not None else None
    step_time, share = typical(times), comm_s / profiled_s
    if group is not None:  # the slowest rank sets the pace
        step_time, share = group_max(step_time, group), group_max(share, group)
    if w.rank != 0:
        return []
    tokens = cfg.batch * cfg.seq_len
    common = dict(stage=STAGE, case="train_step", tp=degree, world=degree, dtype=cfg.dtype, source="torch")
    return [
        Row(metric="step_time_s", value=step_time, unit="s", **common),
        Row(metric="tokens_per_s", value=tokens / step_time, unit="tokens/s", **common),
        Row(metric="comm_share", value=share, unit="ratio", **common),
    ]


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--degrees", default="1,2,4")
    args = p.parse_args()
    cfg = model_from(args)
    degrees = degrees_from(args.degrees)
    mistakes = mistakes_from(args)
    t0 = time.monotonic()
    log(t0, "modules imported")
    with worker_session() as w:
        log(t0, "group up")
        check_cfg = check_config(cfg)
        torch.set_float32_matmul_precision("highest")  # the golden check in true float32 (no TF32)
        ref = reference(check_cfg, w.device)
        log(t0, "reference done")
        meshes = {d: tp_submesh(w.device.type, w.world, d) for d in degrees if d > 1}
        log(t0, "meshes up")
        for d, mesh in meshes.items():
            common = dict(
                stage=STAGE,
                metric="max_abs_error",
                unit="abs",
                tp=d,
                world=d,
                dtype=CHECK_DTYPE,
                algo="sequence_parallel",
                source="torch",
            )
            errors = golden(w, check_cfg, mesh, ref)
            errors["sequence_sharded_attention"] = sharded_attention_error(w, check_cfg, mesh)
            for mistake in mistakes:
                if mistake == "rope_positions":
                    errors[f"mistake.{mistake}.sequence_sharded_attention"] = sharded_attention_error(
                        w, check_cfg, mesh, follow_shard=False
                    )
                else:
                    for what, value in golden(w, check_cfg, mesh, ref, mistake).items():
                        errors[f"mistake.{mistake}.{what}"] = value
            if w.rank == 0:
                w.emit([Row(case=case, value=value, **common) for case, value in errors.items()])
            log(t0, f"TP={d} golden {errors}")
        for d in degrees:
            if w.rank < d:
                rows = timed(w, cfg, d, meshes.get(d), cfg.steps, cfg.warmup_steps)
                w.emit(rows)
                log(t0, f"TP={d} timed {[(r.metric, r.value) for r in rows]}")
            dist.barrier()
        log(t0, "done")
    log(t0, "process group destroyed")


if __name__ == "__main__":
    main()
