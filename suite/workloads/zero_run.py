"""Plain DDP and ZeRO-1, -2, -3 over every rank in one launch: memory, step time, golden comparison.

    ctx.torchrun("suite.workloads.zero_run", [*model_args(cfg), "--stages", "0,1,2,3"], tag="zero")

Every rank first trains the single-process reference (float32, the whole global batch, warm-up +
timed steps). Then each ZeRO stage in turn (0 = DDP, the reference point): build and warm-up
under the memory measurement, timed steps, model-state bytes held after the last step, and the
parameters compared elementwise with the reference. When the profile's dtype is not float32 the
comparison is a separate float32 run before the timed one.
"""

from __future__ import annotations

import time

import torch
from torch.distributed.device_mesh import init_device_mesh

from ..results import Row
from .data_parallel import ZERO_NAMES, train_data_parallel
from .golden import CHECK_DTYPE, check_config
from .worker_cli import degrees_from, log, mistakes_from, model_from, parser
from .training import train_single_process
from .worker import worker_session

STAGE = "zero"


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--stages", default="0,1,2,3", help="ZeRO stages to run, 0 = plain DDP")
    args = p.parse_args()
    cfg, stages, mistakes = model_from(args), degrees_from(args.stages), mistakes_from(args)
    t0 = time.monotonic()
    log(t0, "modules imported")
    with worker_session() as w:
        torch.set_float32_matmul_precision("highest")
        check_cfg = check_config(cfg)
        reference = train_single_process(check_cfg, cfg.warmup_steps + cfg.steps, w.device)
        mesh = init_device_mesh(w.device.type, (w.world,), mesh_dim_names=("dp",))
        log(t0, "reference trained")
        for zero in stages:
            rows = run_stage(w, cfg, check_cfg, zero, mesh, reference, mistakes)
            if w.rank == 0:
                w.emit(rows)
            log(t0, f"{ZERO_NAMES[zero]} {[(r.case, r.metric, r.value) for r in rows]}")
        log(t0, "done")


def run_stage(w, cfg, check_cfg, zero, mesh, reference, mistakes) -> list[Row]:
    kwargs = dict(device=w.device, group=None, mesh=mesh, warmup=cfg.warmup_steps, steps=cfg.steps)
    common = dict(stage=STAGE, world=w.world, zero=zero, source="torch")
    if cfg.dtype == CHECK_DTYPE:
        result = train_data_parallel(cfg, zero, reference=reference, **kwargs)
        error = result.max_abs_error
    else:
        error = train_data_parallel(check_cfg, zero, reference=reference, measure=False, **kwargs).max_abs_error
        result = train_data_parallel(cfg, zero, **kwargs)
    rows = [Row(case="params_after_training", metric="max_abs_error", value=error, unit="abs", dtype=CHECK_DTYPE,
                **common)]
    for mistake in mistakes:
        bad = train_data_parallel(check_cfg, zero, reference=reference, measure=False, mistake=mistake, **kwargs)
        rows.append(Row(case=f"mistake.{mistake}.params_after_training", metric="max_abs_error",
                        value=bad.max_abs_error, unit="abs", dtype=CHECK_DTYPE, **common))
    timing = dict(case="train_step", dtype=cfg.dtype, **common)
    rows += [
        Row(metric="step_time_s", value=result.step_time_s, unit="s", **timing),
        Row(metric="tokens_per_s_per_rank", value=cfg.batch * cfg.seq_len / w.world / result.step_time_s,
            unit="tokens/s", **timing),
        Row(metric="peak_memory_bytes", value=result.peak_memory_bytes, unit="bytes", **timing),
    ]
    rows += [Row(metric=f"state_{part}_bytes", value=value, unit="bytes", **timing)
             for part, value in result.state_bytes.items()]
    rows.append(Row(metric="state_memory_bytes", value=sum(result.state_bytes.values()), unit="bytes", **timing))
    return rows


if __name__ == "__main__":
    main()
