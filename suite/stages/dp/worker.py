"""Data parallelism (DDP) at every degree in one launch, with a fixed global batch.

    ctx.torchrun("suite.stages.dp.worker", [*model_args(cfg), "--degrees", "1,2,4"], tag="dp")

Every rank first trains the single-process reference (float32, the whole global batch, warm-up
+ timed steps). For each degree d, ranks 0..d−1 (a group of their own) train DDP on slices of the
same global batches while the others wait at a barrier, then its parameters are compared
elementwise with the reference. When the profile's dtype is not float32 the comparison is a
separate float32 run before the timed one. Across nodes the launch is every node's ranks, node-major,
so a degree up to nproc stays on node 0 and a larger one spans whole nodes; --record-nodes adds a
row per degree naming the nodes its ranks were on (suite/workloads/node_ranks.py).
"""

from __future__ import annotations

import time

import torch
import torch.distributed as dist

from suite.results import Row
from suite.workloads.data_parallel import train_data_parallel
from suite.workloads.golden import CHECK_DTYPE, check_config
from suite.workloads.node_ranks import node_names, nodes_rows
from suite.workloads.training import train_single_process
from suite.workloads.worker import worker_session
from suite.workloads.worker_cli import degrees_from, log, mistakes_from, model_from, parser

STAGE = "dp"


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--degrees", default="1,2,4")
    p.add_argument(
        "--record-nodes", action="store_true", help="a row per degree naming the nodes its ranks ran on"
    )
    args = p.parse_args()
    cfg, degrees, mistakes = model_from(args), degrees_from(args.degrees), mistakes_from(args)
    t0 = time.monotonic()
    log(t0, "modules imported")
    with worker_session() as w:
        torch.set_float32_matmul_precision("highest")
        check_cfg = check_config(cfg)
        total = cfg.warmup_steps + cfg.steps
        reference = train_single_process(check_cfg, total, w.device)
        log(t0, "reference trained")
        if args.record_nodes:
            names = node_names(w.world)
            if w.rank == 0:
                w.emit(nodes_rows(names, degrees, STAGE))
            log(t0, f"ranks on nodes {names}")
        for d in degrees:
            # every rank takes part in making it; ranks 0..d−1 are in it
            group = dist.new_group(list(range(d)))
            if w.rank < d:
                rows = run_degree(
                    w, cfg, check_cfg, d, group, reference, mistakes if d == max(degrees) else []
                )
                if w.rank == 0:
                    w.emit(rows)
                log(t0, f"DP={d} {[(r.case, r.metric, r.value) for r in rows]}")
            dist.barrier()
        log(t0, "done")


def run_degree(w, cfg, check_cfg, d, group, reference, mistakes) -> list[Row]:
    kwargs = dict(device=w.device, group=group, warmup=cfg.warmup_steps, steps=cfg.steps)
    common = dict(stage=STAGE, world=d, source="torch")
    rows = []
    if cfg.dtype == CHECK_DTYPE:
        result = train_data_parallel(cfg, 0, reference=reference, **kwargs)
        error = result.max_abs_error
    else:
        error = train_data_parallel(check_cfg, 0, reference=reference, measure=False, **kwargs).max_abs_error
        result = train_data_parallel(cfg, 0, **kwargs)
    rows.append(
        Row(
            case="params_after_training",
            metric="max_abs_error",
            value=error,
            unit="abs",
            dtype=CHECK_DTYPE,
            **common,
        )
    )
    for mistake in mistakes:
        bad = train_data_parallel(check_cfg, 0, reference=reference, measure=False, mistake=mistake, **kwargs)
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
    tokens = cfg.batch * cfg.seq_len  # the fixed global batch, tokens per step
    step = result.step_time_s
    timing = dict(case="train_step", dtype=cfg.dtype, **common)
    rows += [
        Row(metric="step_time_s", value=step, unit="s", **timing),
        Row(metric="tokens_per_s", value=tokens / step, unit="tokens/s", **timing),
        Row(metric="tokens_per_s_per_rank", value=tokens / d / step, unit="tokens/s", **timing),
        Row(metric="peak_memory_bytes", value=result.peak_memory_bytes, unit="bytes", **timing),
    ]
    return rows


if __name__ == "__main__":
    main()
