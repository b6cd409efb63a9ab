"""Plain DDP and ZeRO-1, -2, -3 over every rank in one launch: memory, step time, golden comparison.

    ctx.torchrun("suite.stages.zero.worker", [*model_args(cfg), "--stages", "0,1,2,3"], tag="zero")
    ctx.torchrun("suite.stages.zero.worker", [*model_args(cfg), "--degrees", "8,16", "--record-nodes"],
    tag="zero")

Every rank first trains the single-process reference (float32, the whole global batch, warm-up +
timed steps). Then each ZeRO stage in turn (0 = DDP, the reference point): build and warm-up
under the memory measurement, timed steps, model-state bytes held after the last step, and the
parameters compared elementwise with the reference. When the profile's dtype is not float32 the
comparison is a separate float32 run before the timed one.

--degrees (default: every rank) runs all of that at each degree d on ranks 0..d−1 (a DeviceMesh and a
group of their own; the others wait at a barrier): across nodes the launch is every node's ranks, node-major,
so d = nproc is node 0 alone and each larger degree spans whole nodes. The deliberate mistakes run at the
largest degree only; --record-nodes adds a row per degree naming the nodes its ranks were on.
"""

from __future__ import annotations

import time

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh

from suite.results import Row
from suite.workloads.data_parallel import ZERO_NAMES, train_data_parallel
from suite.workloads.golden import CHECK_DTYPE, check_config
from suite.workloads.node_ranks import node_names, nodes_rows
from suite.workloads.training import train_single_process
from suite.workloads.worker import worker_session
from suite.workloads.worker_cli import degrees_from, log, mistakes_from, model_from, parser

STAGE = "zero"


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--stages", default="0,1,2,3", help="ZeRO stages to run, 0 = plain DDP")
    p.add_argument(
        "--degrees", default="", help="data-parallel degrees, each on ranks 0..d−1 (default: every rank)"
    )
    p.add_argument(
        "--record-nodes", action="store_true", help="a row per degree naming the nodes its ranks ran on"
    )
    args = p.parse_args()
    cfg, stages, mistakes = model_from(args), degrees_from(args.stages), mistakes_from(args)
    t0 = time.monotonic()
    log(t0, "modules imported")
    with worker_session() as w:
        torch.set_float32_matmul_precision("highest")
        check_cfg = check_config(cfg)
        degrees = degrees_from(args.degrees) or [w.world]
        reference = train_single_process(check_cfg, cfg.warmup_steps + cfg.steps, w.device)
        log(t0, "reference trained")
        if args.record_nodes:
            names = node_names(w.world)
            if w.rank == 0:
                w.emit(nodes_rows(names, degrees, STAGE))
            log(t0, f"ranks on nodes {names}")
        for d in degrees:
            group, mesh = degree_group(w, d)
            if w.rank < d:
                for zero in stages:
                    rows = run_stage(
                        w,
                        cfg,
                        check_cfg,
                        zero,
                        d,
                        group,
                        mesh,
                        reference,
                        mistakes if d == max(degrees) else [],
                    )
                    if w.rank == 0:
                        w.emit(rows)
                    log(t0, f"{ZERO_NAMES[zero]} over {d} {[(r.case, r.metric, r.value) for r in rows]}")
            if len(degrees) > 1:
                dist.barrier()  # the ranks outside this degree wait for it
        log(t0, "done")


def degree_group(w, d: int):
    """(process group, DeviceMesh) of ranks 0..d−1: the world's own (group None) at d = world; made by every
    rank."""
    if d == w.world:
        return None, init_device_mesh(w.device.type, (w.world,), mesh_dim_names=("dp",))
    return dist.new_group(list(range(d))), DeviceMesh(w.device.type, torch.arange(d), mesh_dim_names=("dp",))


def run_stage(w, cfg, check_cfg, zero, d, group, mesh, reference, mistakes) -> list[Row]:
    kwargs = dict(device=w.device, group=group, mesh=mesh, warmup=cfg.warmup_steps, steps=cfg.steps)
    common = dict(stage=STAGE, world=d, zero=zero, source="torch")
    if cfg.dtype == CHECK_DTYPE:
        result = train_data_parallel(cfg, zero, reference=reference, **kwargs)
        error = result.max_abs_error
    else:
        error = train_data_parallel(
            check_cfg, zero, reference=reference, measure=False, **kwargs
        ).max_abs_error
        result = train_data_parallel(cfg, zero, **kwargs)
    rows = [
        Row(
            case="params_after_training",
            metric="max_abs_error",
            value=error,
            unit="abs",
            dtype=CHECK_DTYPE,
            **common,
        )
    ]
    for mistake in mistakes:
        bad = train_data_parallel(
            check_cfg, zero, reference=reference, measure=False, mistake=mistake, **kwargs
        )
        rows.append(
            Row(
                case=f"mistake.{mistake}.params_after_training",
                metric="max_abs_error",
                value=bad.max_abs_error,
                unit="abs",
                dtype=CHECK_DTYPE,
                **common,
            )
        )
    timing = dict(case="train_step", dtype=cfg.dtype, **common)
    rows += [
        Row(metric="step_time_s", value=result.step_time_s, unit="s", **timing),
        Row(
            metric="tokens_per_s_per_rank",
            value=cfg.batch * cfg.seq_len / d / result.step_time_s,
            unit="tokens/s",
            **timing,
        ),
        Row(metric="peak_memory_bytes", value=result.peak_memory_bytes, unit="bytes", **timing),
    ]
    rows += [
        Row(metric=f"state_{part}_bytes", value=value, unit="bytes", **timing)
        for part, value in result.state_bytes.items()
    ]
    rows.append(
        Row(metric="state_memory_bytes", value=sum(result.state_bytes.values()), unit="bytes", **timing)
    )
    return rows


if __name__ == "__main__":
    main()
