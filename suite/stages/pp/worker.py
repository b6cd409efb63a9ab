"""Pipeline parallelism in one launch: the golden check, the bubble drill, the GPT timed per schedule.

    ctx.torchrun("suite.stages.pp.worker", [*model_args(cfg), *pp_args(cfg_pp)], tag="pp", nproc=N)

1. golden (every PP degree d, ranks 0..d−1): the GPT split into stages (suite/stages/pp/split.py),
   one step of each schedule on the golden batch cut into M micro-batches: the loss (mean of the
   micro-batch losses) and every parameter's gradient against one process's full batch, then the
   parameters after `golden_steps` AdamW steps against one process's. float32, TF32 off. Deliberate
   mistakes (--mistakes) run one step of 1F1B each: dropped_layer (a stage boundary off by one, one
   block in no stage), unscaled_grads (scale_grads=False: micro-batch gradients summed, M× too big),
   reordered_microbatches (targets in reversed micro-batch order against the inputs).
2. bubble (ranks 0..bubble_ranks−1): sleep stages (suite/stages/pp/bubble.py), idle/total of each
   rank per schedule and M; the hand-written 1F1B over isend/irecv beside torch's schedules.
3. timed (every degree): the GPT in the profile's dtype, M micro-batches of `micro_batch` sequences:
   step time, each rank's bubble (CUDA events around the compute calls on GPUs) and, on GPUs, the
   activation memory of each stage (peak during the step − allocated at its start).
A parameter no stage holds (dropped_layer) is compared as zeros: its error is its own largest magnitude.
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from typing import Callable

import torch
import torch.distributed as dist

from suite.config import GptConfig
from suite.costmodel.bubble import runs_at
from suite.results import Row
from suite.stages.pp.bubble import WIDTH, BusyClock, SleepStage, hand_1f1b, measure_idle
from suite.stages.pp.split import chunks_of, local_stages, make_schedule, stage_indices, stage_modules
from suite.stages.pp.timeline import replay
from suite.workloads.golden import CHECK_DTYPE, check_config, group_max, max_abs_error
from suite.workloads.gpt import build_model, loss_fn, synthetic_batch
from suite.workloads.training import make_optimizer, train_single_process
from suite.workloads.worker import Worker, worker_session
from suite.workloads.worker_cli import degrees_from, log, mistakes_from, model_from, parser

STAGE = "pp"
MISTAKES = ("dropped_layer", "unscaled_grads", "reordered_microbatches")
MISTAKE_SCHEDULE = "1f1b"
DRILL_MISTAKES = ("extra_barrier",)
"""Deliberate mistakes of the bubble drill: each runs hand_1f1b once more with it, rows under algo
hand_1f1b.<mistake> (the judge does not read them; the tests judge them in place of the real ones)."""
DRILL_MISTAKE_SCHEDULE = "hand_1f1b"


def _names(text: str) -> list[str]:
    return [s.strip() for s in text.split(",") if s.strip()]


def reference(cfg: GptConfig, steps: int, device) -> dict:
    """One process, the whole batch: the step-0 loss and gradients, and the parameters after `steps` AdamW
    steps."""
    model = build_model(cfg, device)
    tokens, targets = synthetic_batch(cfg, 0, device=device)
    loss = loss_fn(model(tokens), targets)
    loss.backward()
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters()}
    return {"loss": loss.detach(), "grads": grads, "params": train_single_process(cfg, steps, device)}


def _pipeline(cfg, schedule, group, chunks, microbatches, device, mistake, model):
    stages = local_stages(model, schedule, group, chunks, device, drop_layer=mistake == "dropped_layer")
    sched = make_schedule(schedule, stages, microbatches, loss_fn, scale_grads=mistake != "unscaled_grads")
    params = {n: p for m in stage_modules(stages) for n, p in m.named_parameters()}
    return stages, sched, params


def _coverage_error(held: dict, want: dict, group) -> float:
    """max |held − want| over the group; a tensor of `want` that no rank holds (a dropped layer) counts as
    zeros, so its error is its own largest magnitude."""
    names = sorted(want)
    presence = torch.tensor(
        [float(n in held) for n in names], dtype=torch.float64, device=next(iter(want.values())).device
    )
    dist.all_reduce(presence, group=group)
    local = max((max_abs_error(t, want[n]) for n, t in held.items()), default=0.0)
    orphans = [want[n].abs().max().item() for n, count in zip(names, presence.tolist()) if count == 0]
    return group_max(max([local, *orphans]), group)


def golden(
    w: Worker,
    cfg: GptConfig,
    schedule: str,
    group,
    chunks: int,
    microbatches: int,
    steps: int,
    ref: dict,
    model,
    mistake: str | None = None,
) -> dict[str, float]:
    """max |pipeline − one process| of the loss and the gradients after one step, and of the parameters after
    `steps` AdamW steps (one step and no parameters for a mistake). `model` is the float32 GPT on the CPU,
    built once: each pipeline copies its stages out of it."""
    stages, sched, params = _pipeline(cfg, schedule, group, chunks, microbatches, w.device, mistake, model)
    optimizer = make_optimizer(params.values())
    out: dict[str, float] = {}
    for step in range(max(1, steps)):
        tokens, targets = synthetic_batch(cfg, step, device=w.device)
        if mistake == "reordered_microbatches":
            targets = torch.cat(list(reversed(targets.chunk(microbatches))))
        optimizer.zero_grad(set_to_none=True)
        losses: list[torch.Tensor] = []
        sched.step(tokens, target=targets, losses=losses)
        if step == 0:
            loss_error = max_abs_error(torch.stack(losses).mean(), ref["loss"]) if losses else 0.0
            out["loss"] = group_max(loss_error, group)
            out["grads"] = _coverage_error(
                {n: p.grad for n, p in params.items() if p.grad is not None}, ref["grads"], group
            )
            if mistake:
                return out
        optimizer.step()
    out["params_after_training"] = _coverage_error(
        {n: p.detach() for n, p in params.items()}, ref["params"], group
    )
    return out


def sleep_stage_idle(
    w: Worker,
    schedule: str,
    group,
    microbatches: int,
    forward_s: float,
    backward_s: float,
    chunks: int,
    extra_barrier: bool = False,
    repeats: int = 1,
) -> tuple[float, float, float]:
    """(idle share replayed from the schedule's slots, wall-clock idle/total, window s) of this rank in the
    least idle of `repeats` measured steps of `schedule` over sleep stages (after an unmeasured one). Every
    chunk of an interleaved rank sleeps f and b too: (P−1)/(vM+P−1) holds for any chunk length, and shorter
    chunks would let the per-op overhead decide.

    The least idle step: a loaded machine can only add to a step's replay (a rank descheduled for a whole slot
    while its neighbour's slot ended reads as a wait, suite/stages/pp/timeline.py), and rarely in two steps
    running; a wrong schedule adds in every step. Every rank picks the same step (the replays are of all
    ranks)."""
    clock = BusyClock("wall", w.device)
    step = _sleep_step(w, schedule, group, microbatches, forward_s, backward_s, chunks, clock, extra_barrier)
    best, best_sum = (math.nan, math.nan, math.nan), math.inf
    for _ in range(max(1, repeats)):
        wall, window = measure_idle(step, clock, w.device, group)
        gathered: list = [None] * dist.get_world_size(group)
        dist.all_gather_object(gathered, (clock.window_start, clock.slots), group=group)  # outside the window
        idle, _ = replay(
            [slots for _, slots in gathered],
            [start for start, _ in gathered],
            {"F": 1.0, "B": backward_s / forward_s, "W": 0.0},
        )
        mine = (idle[dist.get_rank(group)], wall, window)
        if sum(idle) < best_sum:
            best, best_sum = mine, sum(idle)
    return best


def _sleep_step(
    w: Worker,
    schedule: str,
    group,
    microbatches: int,
    forward_s: float,
    backward_s: float,
    chunks: int,
    clock: BusyClock,
    extra_barrier: bool,
) -> Callable[[], None]:
    """One step of `schedule` over sleep stages, to be measured, after an unmeasured one (which connects the
    pair, infers shapes and sets up the transfers)."""
    ranks, rank = dist.get_world_size(group), dist.get_rank(group)
    if schedule == "hand_1f1b":
        module = SleepStage(forward_s, backward_s).to(w.device)
        module.sleeping = False
        hand_1f1b(module, microbatches, group, w.device, clock)
        module.sleeping = True
        return lambda: hand_1f1b(module, microbatches, group, w.device, clock, extra_barrier)
    if extra_barrier:
        raise ValueError("extra_barrier is a mistake of the hand-written schedule only (hand_1f1b)")
    from torch.distributed.pipelining import PipelineStage

    v = chunks_of(schedule, chunks)
    indices = stage_indices(schedule, rank, ranks, chunks)
    modules = [SleepStage(forward_s, backward_s).to(w.device) for _ in indices]
    stages = [PipelineStage(m, i, ranks * v, w.device, group=group) for m, i in zip(modules, indices)]
    sched = make_schedule(schedule, stages, microbatches, lambda y, t: (y - t).square().sum())
    clock.wrap_stages(stages)
    x, target = (
        torch.ones(microbatches, WIDTH, device=w.device),
        torch.zeros(microbatches, WIDTH, device=w.device),
    )
    for m in modules:
        m.sleeping = False
    sched.step(x, target=target)
    for m in modules:
        m.sleeping = True
    return lambda: sched.step(x, target=target)


def drill_rows(
    rank: int, ranks: int, algo: str, m: int, replayed: float, wall: float, window: float
) -> list[Row]:
    """The drill's rows of one rank: `bubble`, the idle share replayed from the schedule's slots (judged), and
    `wall_bubble`, the idle share of the barrier-bounded window on the wall clock (shown, not judged: it moves
    with the machine's load)."""
    common = dict(
        stage=STAGE,
        case="sleep_stages",
        unit="ratio",
        world=ranks,
        algo=algo,
        count=m,
        rank=rank,
        source="hand" if algo.startswith("hand_1f1b") else "torch",
    )
    return [
        Row(metric="bubble", value=replayed, text=f"replayed from the slots; wall idle {wall:.3f}", **common),
        Row(metric="wall_bubble", value=wall, text=f"window {window:.3f} s", **common),
    ]


def timed(
    w: Worker, cfg: GptConfig, schedule: str, group, chunks: int, microbatches: int, micro_batch: int, model
) -> list[Row]:
    """Step time, this rank's bubble and (on GPUs) activation memory of the GPT under `schedule`."""
    stages, sched, params = _pipeline(cfg, schedule, group, chunks, microbatches, w.device, None, model)
    optimizer = make_optimizer(params.values())
    cuda = w.device.type == "cuda"
    clock = BusyClock("cuda" if cuda else "wall", w.device)
    clock.wrap_stages(stages)
    batch = microbatches * micro_batch
    batches = [
        synthetic_batch(cfg, s, batch=batch, device=w.device) for s in range(cfg.warmup_steps + cfg.steps)
    ]
    idle, windows, activation = [], [], 0
    for s, (tokens, targets) in enumerate(batches):
        optimizer.zero_grad(set_to_none=True)
        if cuda:
            torch.cuda.synchronize(w.device)
            torch.cuda.reset_peak_memory_stats(w.device)
            start = torch.cuda.memory_allocated(w.device)
        fraction, window = measure_idle(lambda: sched.step(tokens, target=targets), clock, w.device, group)
        if cuda:
            activation = max(activation, torch.cuda.max_memory_allocated(w.device) - start)
        optimizer.step()  # outside the window: the bubble is the schedule's
        if s >= cfg.warmup_steps:
            idle.append(fraction)
            windows.append(window)
    ranks = dist.get_world_size(group)
    common = dict(
        stage=STAGE,
        case="gpt",
        world=ranks,
        algo=schedule,
        count=microbatches,
        dtype=cfg.dtype,
        source="torch",
    )
    step_s = group_max(statistics.median(windows), group)
    rows = [Row(metric="bubble", value=statistics.median(idle), unit="ratio", rank=w.rank, **common)]
    if cuda:
        rows.append(
            Row(
                metric="activation_memory_bytes",
                value=float(activation),
                unit="bytes",
                rank=w.rank,
                text=f"stages {stage_indices(schedule, dist.get_rank(group), ranks, chunks)}",
                **common,
            )
        )
    if w.rank == 0:
        rows += [
            Row(metric="step_time_s", value=step_s, unit="s", **common),
            Row(metric="tokens_per_s", value=batch * cfg.seq_len / step_s, unit="tokens/s", **common),
        ]
    return rows


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--degrees", default="2", help="PP degrees of the golden check and the timing")
    p.add_argument("--schedules", default="gpipe,1f1b,interleaved_1f1b,interleaved_zb,zbv")
    p.add_argument("--chunks", type=int, default=2, help="v: stages per rank of the looped schedules")
    p.add_argument("--golden-microbatches", type=int, default=4)
    p.add_argument("--golden-steps", type=int, default=3)
    p.add_argument("--bubble-schedules", default="hand_1f1b,gpipe,1f1b,interleaved_1f1b")
    p.add_argument("--bubble-microbatches", default="1,2,4")
    p.add_argument("--bubble-ranks", type=int, default=2)
    p.add_argument("--forward-ms", type=float, default=40.0)
    p.add_argument("--backward-ms", type=float, default=80.0)
    p.add_argument(
        "--bubble-repeats", type=int, default=3, help="measured steps per point of the drill (least idle)"
    )
    p.add_argument("--timed-schedules", default="gpipe,1f1b,interleaved_1f1b")
    p.add_argument("--timed-microbatches", default="4")
    p.add_argument("--micro-batch", type=int, default=1, help="sequences per micro-batch of the timing")
    args = p.parse_args()
    run(args)


def run(args: argparse.Namespace) -> None:
    cfg = model_from(args)
    degrees, mistakes = degrees_from(args.degrees), mistakes_from(args)
    unknown = [m for m in mistakes if m not in (*MISTAKES, *DRILL_MISTAKES)]
    if unknown:
        raise SystemExit(f"unknown mistakes {unknown}: choose from {', '.join((*MISTAKES, *DRILL_MISTAKES))}")
    drill_mistakes = [m for m in mistakes if m in DRILL_MISTAKES]
    mistakes = [m for m in mistakes if m in MISTAKES]
    t0 = time.monotonic()
    log(t0, "modules imported")
    with worker_session() as w:
        torch.set_float32_matmul_precision("highest")  # the golden check in true float32 (no TF32)
        groups = {d: dist.new_group(list(range(d))) for d in sorted({*degrees, args.bubble_ranks})}
        # a collective first: NCCL wants a group's first p2p batch to be whole
        for (
            d,
            group,
        ) in groups.items():
            if w.rank < d:
                dist.barrier(group=group)
        check_cfg = check_config(cfg)
        ref = reference(check_cfg, args.golden_steps, w.device)
        golden_model = build_model(check_cfg, "cpu")
        log(t0, "reference done")
        for d in degrees:
            if w.rank < d:
                for schedule in _names(args.schedules):
                    errors = golden(
                        w,
                        check_cfg,
                        schedule,
                        groups[d],
                        args.chunks,
                        args.golden_microbatches,
                        args.golden_steps,
                        ref,
                        golden_model,
                    )
                    for mistake in mistakes if schedule == MISTAKE_SCHEDULE else []:
                        for what, value in golden(
                            w,
                            check_cfg,
                            schedule,
                            groups[d],
                            args.chunks,
                            args.golden_microbatches,
                            0,
                            ref,
                            golden_model,
                            mistake,
                        ).items():
                            errors[f"mistake.{mistake}.{what}"] = value
                    if w.rank == 0:
                        w.emit(
                            [
                                Row(
                                    stage=STAGE,
                                    case=case,
                                    metric="max_abs_error",
                                    value=v,
                                    unit="abs",
                                    world=d,
                                    algo=schedule,
                                    count=args.golden_microbatches,
                                    dtype=CHECK_DTYPE,
                                    source="torch",
                                )
                                for case, v in errors.items()
                            ]
                        )
                    log(t0, f"PP={d} {schedule} golden {errors}")
            dist.barrier()
        sweep = [
            (s, m, None)
            for s in _names(args.bubble_schedules)
            for m in degrees_from(args.bubble_microbatches)
            if runs_at(s, args.bubble_ranks, m)
        ]
        sweep += [
            (DRILL_MISTAKE_SCHEDULE, m, mistake)
            for mistake in drill_mistakes
            for m in degrees_from(args.bubble_microbatches)
            if runs_at(DRILL_MISTAKE_SCHEDULE, args.bubble_ranks, m)
        ]
        if w.rank < args.bubble_ranks:
            for done, (schedule, m, mistake) in enumerate(sweep):
                w.progress(f"bubble {schedule} M={m}", done=done, of=len(sweep))
                replayed, wall, window = sleep_stage_idle(
                    w,
                    schedule,
                    groups[args.bubble_ranks],
                    m,
                    args.forward_ms / 1e3,
                    args.backward_ms / 1e3,
                    args.chunks,
                    extra_barrier=mistake == "extra_barrier",
                    repeats=args.bubble_repeats,
                )
                w.emit(
                    drill_rows(
                        w.rank,
                        args.bubble_ranks,
                        schedule if mistake is None else f"{schedule}.{mistake}",
                        m,
                        replayed,
                        wall,
                        window,
                    )
                )
                log(
                    t0,
                    f"bubble {schedule} M={m}{' ' + mistake if mistake else ''}: schedule idle "
                    f"{replayed:.3f}, "
                    f"wall idle {wall:.3f} of {window:.3f} s",
                )
        dist.barrier()
        model = build_model(cfg, "cpu")
        for d in degrees:
            if w.rank < d:
                for schedule in _names(args.timed_schedules):
                    for m in degrees_from(args.timed_microbatches):
                        if runs_at(schedule, d, m):
                            w.emit(
                                timed(w, cfg, schedule, groups[d], args.chunks, m, args.micro_batch, model)
                            )
                log(t0, f"PP={d} timed")
            dist.barrier()
        log(t0, "done")
    log(t0, "process group destroyed")


if __name__ == "__main__":
    main()
