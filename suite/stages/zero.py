"""Stage 8 — zero: plain DDP and ZeRO-1/2/3 (torch's ZeroRedundancyOptimizer and FSDP2) over every rank.

    python -m suite run --stages zero --profile nccl-gpu
    python -m suite run --stages zero --profile gloo-cpu     # parameters equal single-process AdamW

One launch (suite/workloads/zero_run.py) runs DDP (ZeRO 0, the reference point), ZeRO-1 (DDP +
ZeroRedundancyOptimizer), ZeRO-2 (FSDP2, reshard_after_forward=False) and ZeRO-3 (True) in turn:
peak memory per rank, model-state bytes held after a step, step time, and the parameters after
warm-up + timed AdamW steps compared elementwise with one process on the same global batches.
Beside the measured memory: the model's bytes per rank, 16Ψ for DDP in float32 (8Ψ in bf16 with
AdamW's state in bf16) down to 16Ψ/N for ZeRO-3.
"""

from __future__ import annotations

import dataclasses

from ..config import Profile
from ..context import StageContext
from ..costmodel.scaling_expectations import ZERO3_SLOWDOWN, model_state_bytes
from ..costmodel.sizing import parameter_count
from ..costmodel.tolerance import CHECK_DTYPE, golden_tolerance
from ..results import Expectation, Row, Verdict
from ..values import is_finite_number
from ..verdicts import judges_performance, verdicts_for
from ._golden import golden_verdicts, tolerance_after_training
from .. import headlines as hl

STAGE = "zero"
MEASURES = "memory per rank and time per step under DDP, ZeRO-1, ZeRO-2 and ZeRO-3"
WRONG = "ZeRO-3 more than 1.5× slower than DDP; memory per rank not falling as the ZeRO stage rises"
REHEARSAL = "all three stages and DDP on gloo; parameters after N AdamW steps equal single-process AdamW"

ROW = 8
AFTER = ("bandwidth", "baseline")
TITLE = "ZeRO-1/2/3 (ZeroRedundancyOptimizer, FSDP2)"
CONFIG = None  # the profile's `model`


def estimate(p) -> tuple[float, str]:
    """`make plan`'s minutes for this stage (p: suite.plan.PlanInputs)."""
    n = p.gpus
    seconds = sum(p.assume.torchrun_launch_s + p.steps * (p.step_s / n + p.zero_comm_s(z, n)) for z in (1, 2, 3))
    return seconds, f"ZeRO-1/2/3 on {n} cards: 1, 1, 1.5 all-reduces of the parameters per step"


ZERO_STAGES = (0, 1, 2, 3)
NAMES = {0: "DDP", 1: "ZeRO-1", 2: "ZeRO-2", 3: "ZeRO-3"}


def expect(profile: Profile, facts: dict) -> list[Expectation]:
    n, cfg = profile.nproc, profile.model
    golden = golden_tolerance(profile.model, profile.model.warmup_steps + profile.model.steps)  # the check's steps
    params = parameter_count(cfg)
    out = []
    for z in ZERO_STAGES:
        out.append(Expectation(stage=STAGE, case="params_after_training", metric="max_abs_error",
                               value=golden.bound, unit="abs", world=n, zero=z, dtype=CHECK_DTYPE,
                               basis=f"at most {golden.describe()} (suite/costmodel/tolerance.py)"))
        out.append(Expectation(stage=STAGE, case="train_step", metric="state_memory_bytes",
                               value=model_state_bytes(params, n, z, cfg.dtype), unit="bytes", world=n, zero=z,
                               dtype=cfg.dtype, basis=f"Ψ = {params:,} parameters; {cfg.dtype} parameters, gradients "
                                                      f"and AdamW moments; {NAMES[z]} over {n} ranks"))
    return out


def run(profile: Profile, ctx: StageContext) -> list[Row]:
    from ..workloads.worker_cli import model_args

    ctx.say(f"DDP, ZeRO-1, ZeRO-2, ZeRO-3 over {profile.nproc} ranks: reference, then each stage")
    return ctx.torchrun("suite.workloads.zero_run", [*model_args(profile.model), "--stages", "0,1,2,3"],
                        tag="zero").rows()


VERDICTS = verdicts_for(STAGE)


def judge(rows: list[Row], expectations: list[Expectation], facts: dict) -> list[Verdict]:
    out = golden_verdicts(STAGE, rows, tolerance_after_training(facts), "zero", ZERO_STAGES, "{key}")
    out = [_named(v) for v in out]
    steps = _metric(rows, "step_time_s")
    peaks = _metric(rows, "peak_memory_bytes")
    expected_time = f"ZeRO-3 step ≤ {ZERO3_SLOWDOWN}× DDP's"
    observed_time = ", ".join(f"{NAMES[z]} {t * 1e3:.3g} ms" for z, t in sorted(steps.items()))
    expected_mem = "peak memory per rank falling as the ZeRO stage rises"
    observed_mem = ", ".join(f"{NAMES[z]} {b / 2**20:.3g} MiB" for z, b in sorted(peaks.items()))
    if not judges_performance(facts):
        return out + [VERDICTS.cpu_skip("zero3_time", expected_time, observed_time),
                      VERDICTS.cpu_skip("memory", expected_mem, observed_mem)]
    if 0 in steps and 3 in steps:
        ratio = steps[3] / steps[0]
        ok = ratio <= ZERO3_SLOWDOWN
        out.append(VERDICTS.check(
            "zero3_time", ok, bad="warn", expected=expected_time, observed=f"{ratio:.2f}× ({observed_time})",
            reason_ok="ZeRO-3's parameter gathering hides behind compute",
            reason_bad="ZeRO-3's parameter all-gathers are not overlapping the forward/backward: check FSDP2 "
                       "prefetching, the interconnect (bandwidth stage), and the per-rank batch size"))
    else:
        out.append(VERDICTS.skip("zero3_time", expected=expected_time, observed=observed_time or "no step times",
                                 reason="DDP or ZeRO-3 did not run"))
    rising = [(a, b) for a, b in zip(ZERO_STAGES, ZERO_STAGES[1:]) if a in peaks and b in peaks and peaks[b] >= peaks[a]]
    out.append(VERDICTS.check(
        "memory", not rising, bad="warn", expected=expected_mem, observed=observed_mem,
        reason_ok="each ZeRO stage holds less per rank",
        reason_bad="not falling from " + ", ".join(f"{NAMES[a]} to {NAMES[b]}" for a, b in rising)
                   + ": activations may dominate the model state at this size, or a stage keeps unsharded "
                     "copies (DDP buckets, FSDP2 reshard_after_forward)"))
    return out


def _metric(rows: list[Row], metric: str) -> dict[int, float]:
    return {r.zero: r.value for r in rows if r.case == "train_step" and r.metric == metric
            and is_finite_number(r.value)}


def _named(v: Verdict) -> Verdict:
    """golden.zero<k> verdicts name the stage as a person says it."""
    z = int(v.id.rsplit("zero", 1)[1])
    return dataclasses.replace(v, reason=v.reason.replace(f"{z} trains", f"{NAMES[z]} trains"))


def headline(rows: list[Row], verdicts: list[Verdict], expectations: list[Expectation]) -> str | None:
    """The highest ZeRO stage's step time and model-state memory, each as a multiple of plain DDP (zero 0)."""
    steps = {r.zero: r.value for r in hl.matching(rows, "train_step", "step_time_s") if r.zero is not None}
    state = {r.zero: r.value for r in hl.matching(rows, "train_step", "state_memory_bytes") if r.zero is not None}
    top = max(steps, default=None)
    if top is None or not steps.get(0) or top == 0:
        return None
    text = f"ZeRO-{top} step {hl.times(steps[top] / steps[0])} DDP"
    if state.get(0) and top in state:
        text += f", model-state memory {hl.times(state[top] / state[0])} DDP"
    return text
