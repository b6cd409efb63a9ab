"""The stage's folder: this declaration; beside it what only this stage runs (figure.py: its figures).
Imported by suite.stages' discovery (runner, plan, ingest, reports); it imports no other stage.
Stage 4 — baseline: the fixed GPT model at TP=1 on one device, the denominator of every scaling figure.

    python -m suite run --stages baseline --profile nccl-gpu    # cuda:0, bf16, MFU against the card's peak
    python -m suite run --stages baseline --profile gloo-cpu    # the same model on CPU; recorded, not judged

Runs in the stage's own process (no launch): build, warm-up and `steps` timed training steps
(forward, backward, AdamW) of suite/workloads/gpt.py at the profile's size. Publishes
facts["baseline"] (step time, tokens/s, peak memory, MFU) for tp and dp.
"""

from __future__ import annotations

import math

from suite import headlines as hl
from suite.config import Profile
from suite.context import StageContext
from suite.costmodel.scaling_expectations import MFU_FLOOR, model_state_bytes
from suite.costmodel.sizing import FLOPS_FORMULA, parameter_count, training_flops_per_token
from suite.facts import Facts, gpu, ingested
from suite.hardware.card_fit import card_bytes
from suite.hardware.gpu_sampler import period_for, sampling, throttle_verdicts
from suite.hardware.stage_fit import scaling_model, scaling_sized
from suite.results import Expectation, Row, Verdict
from suite.stage_contract import Stage
from suite.verdicts import judges_performance, verdicts_for

NAME = "baseline"

CONFIG = None  # the profile's `model`, shared by every scaling stage


def estimate(p) -> tuple[float, str]:
    """`make plan`'s minutes for this stage (p: suite.plan.hours.PlanInputs)."""
    return p.assume.torchrun_launch_s + p.steps * p.step_s, (
        f"{p.steps} steps × {p.step_s * 1e3:.0f} ms on one card ({p.params / 1e6:.0f} M parameters, "
        f"MFU {p.assume.mfu:.0%})"
    )


def expect(profile: Profile, facts: Facts) -> list[Expectation]:
    cfg = scaling_model(profile, facts)  # sized to the card (suite/hardware/stage_fit.py)
    params = parameter_count(cfg)
    common = dict(stage=NAME, case="train_step", tp=1, world=1, dtype=cfg.dtype)
    out = [
        Expectation(
            metric="parameters",
            value=params,
            unit="count",
            basis="suite/workloads/gpt.py parameter_count",
            **common,
        ),
        Expectation(
            metric="flops_per_token",
            value=training_flops_per_token(cfg),
            unit="FLOP",
            basis=FLOPS_FORMULA,
            **common,
        ),
        *(
            []
            if card_bytes(facts) is None
            else [  # what the model was sized to on this card
                Expectation(
                    metric="sizing",
                    value=params,
                    unit="count",
                    source="model",
                    basis=scaling_sized(profile.model, card_bytes(facts))[1],
                    **common,
                )
            ]
        ),
        Expectation(
            metric="model_state_bytes",
            value=model_state_bytes(params, 1, 0, cfg.dtype),
            unit="bytes",
            basis=f"parameters + gradients + AdamW's two moments, all {cfg.dtype}",
            **common,
        ),
    ]
    if not profile.is_rehearsal:
        out.append(
            Expectation(
                metric="mfu",
                value=MFU_FLOOR,
                unit="ratio",
                basis=f"at least {MFU_FLOOR:.0%} of the bf16 dense peak for d={cfg.hidden}, "
                f"{cfg.batch * cfg.seq_len} tokens per step",
                **common,
            )
        )
        peak = gpu(facts)
        if peak is not None and peak.bf16_dense_flops:
            tokens = cfg.batch * cfg.seq_len
            step = tokens * training_flops_per_token(cfg) / (MFU_FLOOR * peak.bf16_dense_flops)
            out.append(
                Expectation(
                    metric="step_time_s",
                    value=step,
                    unit="s",
                    basis=f"slowest step at {MFU_FLOOR:.0%} MFU of {peak.model} "
                    f"({peak.bf16_dense_tflops:g} TFLOP/s)",
                    **common,
                )
            )
    return out


def run(profile: Profile, ctx: StageContext) -> list[Row]:
    import torch

    from suite.stages.baseline.worker import measure_baseline

    torch.set_num_threads(profile.omp_threads)  # the same CPU share as one worker rank
    device = torch.device("cuda", 0) if profile.device == "cuda" else torch.device("cpu")
    cfg = scaling_model(profile, ctx.facts)
    ctx.say(
        f"d={cfg.hidden}, {cfg.layers} layers, batch {cfg.batch}×{cfg.seq_len}, {cfg.dtype}: "
        f"{cfg.warmup_steps} warm-up + {cfg.steps} timed steps on {device}"
    )
    with sampling(ctx.raw_dir, NAME, period_ms=period_for(profile)) as samples:  # power and clocks meanwhile
        rows = measure_baseline(cfg, device)
    values = {r.metric: r.value for r in rows if r.text is None or r.metric == "peak_tflops"}
    ctx.publish(
        NAME,
        {
            "step_time_s": values["step_time_s"],
            "tokens_per_s": values["tokens_per_s"],
            "peak_memory_bytes": values["peak_memory_bytes"],
            "mfu": values.get("mfu"),
            "device": next(r.text for r in rows if r.metric == "device"),
            "dtype": cfg.dtype,
            "tokens_per_step": cfg.batch * cfg.seq_len,
        },
    )
    return rows + samples.rows()


VERDICTS = verdicts_for(NAME)


def judge(rows: list[Row], expectations: list[Expectation], facts: Facts) -> list[Verdict]:
    by = {r.metric: r for r in rows}
    out = []
    step = by.get("step_time_s")
    ok = step is not None and math.isfinite(step.value) and step.value > 0
    out.append(
        VERDICTS.check(
            "measured",
            ok,
            expected="a finite step time",
            observed=f"{step.value:.4g} s" if step else "no step-time row",
            reason_ok="the denominator of the scaling figures is measured",
            reason_bad="no baseline step time: tp and dp speedups cannot be computed; see "
            "raw/baseline/stage.log",
        )
    )
    out += throttle_verdicts(rows, stage=NAME, on_gpu=judges_performance(facts), ingested=ingested(facts))
    if not judges_performance(facts):
        out.append(
            VERDICTS.cpu_skip(
                "mfu",
                f"MFU ≥ {MFU_FLOOR:.0%} of the card's bf16 dense peak",
                f"{by['tokens_per_s'].value:.4g} tokens/s on CPU" if "tokens_per_s" in by else "",
            )
        )
        return out
    mfu_row = by.get("mfu")
    device = by["device"].text if "device" in by else "?"
    if mfu_row is None or not math.isfinite(mfu_row.value):
        out.append(
            VERDICTS.skip(
                "mfu",
                expected=f"MFU ≥ {MFU_FLOOR:.0%}",
                observed=f"{device}: no bf16 peak known",
                reason=f"add {device}'s bf16 dense peak with its datasheet source to suite/hardware/gpus.py",
            )
        )
        return out
    out.append(
        VERDICTS.check(
            "mfu",
            mfu_row.value >= MFU_FLOOR,
            bad="warn",
            expected=f"MFU ≥ {MFU_FLOOR:.0%}, model FLOPs counted as {FLOPS_FORMULA}",
            observed=f"MFU {mfu_row.value:.1%} on {device}",
            reason_ok="the card delivers what its peak allows for this model size",
            reason_bad="far below the card's peak: check clocks and power capping (nvidia-smi -q -d "
            "CLOCK,POWER), "
            "thermal throttling, another process on the card, or a CPU-bound step (launch overhead)",
        )
    )
    return out


def headline(rows: list[Row], verdicts: list[Verdict], expectations: list[Expectation]) -> str | None:
    """One card's step time and throughput (the denominator of the scaling figures)."""
    step = hl.matching(rows, "train_step", "step_time_s")
    if not step:
        return None
    tokens = hl.matching(rows, "train_step", "tokens_per_s")
    flops = hl.matching(rows, "train_step", "achieved_tflops")
    parts = [f"step {hl.seconds(step[0].value)}"]
    parts += [f"{hl.number(tokens[0].value)} tokens/s"] if tokens else []
    parts += [f"{hl.number(flops[0].value)} TFLOP/s"] if flops else []
    mfu = hl.verdict(verdicts, "baseline.mfu")
    if mfu is not None and mfu.status != "skip":
        parts.append(f"MFU {mfu.observed} · expected {mfu.expected}")
    return " · ".join(parts)


STAGE = Stage(
    row=4,
    after=("topology",),  # the GPU model for the MFU
    profiles=("gloo-cpu", "nccl-gpu", "nccl-1gpu"),  # one card has a baseline too
    title="the model at TP=1 on one card: tokens/s, memory, MFU",
    measures="the fixed GPT model at TP=1 on one device: tokens/s, step time, peak memory, MFU",
    wrong="MFU far below what the card's peak allows for this model size",
    rehearsal="the same model on CPU; numbers recorded, not judged",
    config=CONFIG,
    estimate=estimate,
    expect=expect,
    run=run,
    judge=judge,
    headline=headline,
)
