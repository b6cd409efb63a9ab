"""Every overlap mode of DDP in one launch: gradients checked elementwise, then steps timed.

    ctx.torchrun("suite.stages.overlap.worker", [*model_args(cfg), "--modes", "none,0.01,default,100"])

For each mode (suite/workloads/ddp_modes.py), in the order given:
  1. check: the model at its seeded weights in float32, wrapped the mode's way; two steps without an
     optimizer let DDP rebuild its buckets in gradient-ready order; then the gradients of one fixed
     global batch (each rank its slice) are compared elementwise with one process's gradients of the
     whole batch, and with the first mode's;
  2. watch (overlapped modes): the model in the profile's dtype under a communication hook, one backward
     after the rebuild: each bucket's parameters, launch and completion against every gradient's
     (suite/stages/overlap/ddp_watch.py; rank 0's clock);
  3. timing: the model in the profile's dtype, AdamW, warm-up then timed steps.
Rows (rank 0, maxima over ranks): step_time_s, max_grad_diff, max_grad_diff_vs_<first mode>, buckets, and for
the no-overlap mode compute_s and comm_s.

Deliberate mistakes (`--mistakes`, for the tests: the gradient check must catch each), real bugs of a
hand-rolled overlap that run without an error:
  no_sync       the check step's backward runs inside no_sync() and nothing reduces afterwards: each rank
                keeps the gradients of its own slice
  no_average    the all-reduce after backward sums the gradients and never divides by the world size
  stale_grads   the gradients of the bucket-rebuild steps are not zeroed: the check step adds to them
Each runs untimed after every mode, in the first overlapped mode given (else the first); rows case
`mistake.<name>`, metric max_grad_diff.
"""

from __future__ import annotations

import statistics
import time

import torch

from suite.config import GptConfig
from suite.results import Row
from suite.stages.overlap.ddp_watch import watch_backward, watch_rows
from suite.workloads import golden
from suite.workloads.ddp_modes import (
    OverlapMode,
    all_reduce_flat,
    bucket_sizes,
    forward_backward,
    train_step,
    wrap,
)
from suite.workloads.gpt import build_model, loss_fn, synthetic_batch
from suite.workloads.training import local_batch, make_optimizer
from suite.workloads.worker import worker_session
from suite.workloads.worker_cli import mistakes_from, model_from, parser

STAGE = "overlap"
CHECK_STEP = 1_000_000  # the check batch's step index: a batch no timed step draws
REBUILD_STEPS = 2  # DDP rebuilds its buckets after the first backward; the second uses them
MISTAKES = ("no_sync", "no_average", "stale_grads")


def reference_grads(cfg: GptConfig, device: torch.device) -> list[torch.Tensor]:
    """One process, the whole global check batch: the gradients every mode must reproduce."""
    model = build_model(cfg, device)
    tokens, targets = synthetic_batch(cfg, CHECK_STEP, device=device)
    loss_fn(model(tokens), targets).backward()
    return [p.grad.detach().clone() for p in model.parameters()]


def checked_grads(
    cfg: GptConfig, mode: OverlapMode, w, mistake: str | None = None
) -> tuple[list[torch.Tensor], list[int], object]:
    """The mode's reduced gradients of the check batch, its bucket sizes, and the DDP model (reusable for
    timing); with `mistake` (one of MISTAKES), the gradients that mistake produces instead."""
    ddp = wrap(build_model(cfg, w.device), mode, w.device)
    for step in range(REBUILD_STEPS):
        forward_backward(ddp, mode, *local_batch(cfg, CHECK_STEP - 1 - step, w.rank, w.world, w.device))
        if mistake != "stale_grads":
            ddp.zero_grad(set_to_none=True)
    tokens, targets = local_batch(cfg, CHECK_STEP, w.rank, w.world, w.device)
    if mistake in ("no_sync", "no_average"):
        with ddp.no_sync():
            loss_fn(ddp(tokens), targets).backward()
        if mistake == "no_average":
            all_reduce_flat(ddp, 1)  # divided by 1: the sum over ranks, not their average
    else:
        forward_backward(ddp, mode, tokens, targets)
    grads = [p.grad.detach().clone() for p in ddp.parameters()]
    ddp.zero_grad(set_to_none=True)
    return grads, bucket_sizes(ddp) if mode.overlap else [], ddp


def timed_steps(cfg: GptConfig, mode: OverlapMode, ddp, w) -> dict[str, float]:
    """Median step time (and, without overlap, its compute and communication parts), seconds."""
    optimizer = make_optimizer(ddp.parameters())
    timings = []
    for step in range(cfg.warmup_steps + cfg.steps):
        t = train_step(
            ddp, mode, *local_batch(cfg, step, w.rank, w.world, w.device), optimizer, w.synchronize
        )
        if step >= cfg.warmup_steps:
            timings.append(t)
    out = {"step_time_s": statistics.median(t.step_s for t in timings)}
    if not mode.overlap:
        out["compute_s"] = statistics.median(t.compute_s for t in timings)
        out["comm_s"] = statistics.median(t.comm_s for t in timings)
    return out


def main() -> None:
    p = parser(__doc__.split("\n")[0])
    p.add_argument("--modes", required=True, help="comma-separated: none, default, or a bucket_cap_mb")
    args = p.parse_args()
    cfg, mistakes = model_from(args), mistakes_from(args)
    unknown = [m for m in mistakes if m not in MISTAKES]
    if unknown:
        p.error(f"unknown mistake(s) {unknown}: choose from {', '.join(MISTAKES)}")
    check_cfg = golden.check_config(cfg)
    modes = [OverlapMode.parse(m) for m in args.modes.split(",")]

    with worker_session() as w:
        print(f"modes {[m.label for m in modes]}; model {cfg}", flush=True)
        reference = reference_grads(check_cfg, w.device)
        grad_abs_max = max(g.abs().max().item() for g in reference)
        first: list[torch.Tensor] | None = None
        rows: list[Row] = []

        def row(
            mode: OverlapMode,
            metric: str,
            value: float,
            unit: str,
            text: str | None = None,
            dtype: str = cfg.dtype,
        ) -> Row:
            return Row(
                stage=STAGE,
                case="ddp",
                metric=metric,
                value=value,
                unit=unit,
                overlap=mode.label,
                world=w.world,
                dtype=dtype,
                text=text,
            )

        for index, mode in enumerate(modes):
            w.progress(f"{mode.label}: gradient check", done=index, of=len(modes))
            started = time.perf_counter()
            grads, buckets, ddp = checked_grads(check_cfg, mode, w)
            diff = golden.group_max(golden.max_abs_error_many(zip(grads, reference)))
            if first is None:
                first = grads
            diff_first = golden.group_max(golden.max_abs_error_many(zip(grads, first)))
            rows += [
                row(mode, "max_grad_diff", diff, "ratio", dtype=check_cfg.dtype),
                row(mode, f"max_grad_diff_vs_{modes[0].label}", diff_first, "ratio", dtype=check_cfg.dtype),
            ]
            if buckets:
                rows.append(row(mode, "buckets", len(buckets), "count", text=" ".join(map(str, buckets))))
            # a fresh wrapper with a communication hook: the check above stays on DDP's reducer
            if mode.overlap:
                w.progress(f"{mode.label}: buckets watched", done=index, of=len(modes))
                rows += watch_rows(watch_backward(cfg, mode, w), mode.label, w.world, cfg.dtype)
            watched = time.perf_counter()

            w.progress(f"{mode.label}: timing", done=index, of=len(modes))
            if cfg.dtype != check_cfg.dtype:
                del ddp
                ddp = wrap(build_model(cfg, w.device), mode, w.device)
            for metric, seconds in timed_steps(cfg, mode, ddp, w).items():
                rows.append(row(mode, metric, golden.group_max(seconds), "s"))
            del ddp
            print(
                f"{mode.label}: buckets {buckets or '-'}; max |grad - reference| {diff:.3g}; "
                f"check and watch {watched - started:.2f} s, timing {time.perf_counter() - watched:.2f} s",
                flush=True,
            )
        mistaken_mode = next((m for m in modes if m.overlap), modes[0])
        # after every real row: a reader looking up a mode's row finds the real one first
        for mistake in mistakes:
            w.progress(f"mistake {mistake}: gradient check", done=len(modes), of=len(modes))
            grads, _, ddp = checked_grads(check_cfg, mistaken_mode, w, mistake)
            del ddp
            diff = golden.group_max(golden.max_abs_error_many(zip(grads, reference)))
            rows.append(
                Row(
                    stage=STAGE,
                    case=f"mistake.{mistake}",
                    metric="max_grad_diff",
                    value=diff,
                    unit="ratio",
                    overlap=mistaken_mode.label,
                    world=w.world,
                    dtype=check_cfg.dtype,
                )
            )
            print(
                f"mistake {mistake} in {mistaken_mode.label}: max |grad - reference| {diff:.3g}", flush=True
            )
        rows.append(
            Row(
                stage=STAGE,
                case="ddp",
                metric="grad_abs_max",
                value=grad_abs_max,
                unit="ratio",
                world=w.world,
                dtype=check_cfg.dtype,
            )
        )
        if w.rank == 0:
            w.emit(rows)


if __name__ == "__main__":
    main()
