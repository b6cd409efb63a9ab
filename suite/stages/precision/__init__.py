"""The stage's folder: this declaration; beside it what only this stage runs (figure.py: its figures).
Imported by suite.stages' discovery (runner, plan, ingest, reports); it imports no other stage.
Mixed precision: fp16's range without and with loss scaling, bf16 without it, clipping after unscale_.

    python -m suite run --stages precision --profile nccl-1gpu    # on cuda:0
    python -m suite run --stages precision --profile gloo-cpu     # the same numerics on CPU (autocast
                                                                  # bf16/fp16)

Runs in the stage's own process (no launch; one device is all it needs): suite/stages/precision/worker.py's
range probe (one backward with the loss × 2^k: gradients zeroed and non-finite, fp32 vs bf16 vs fp16) and
four training runs of a tiny GPT (fp32, bf16, fp16 unscaled, fp16 with torch.amp.GradScaler). The numerics are
the hardware's formats, not its speed: the verdicts are correctness verdicts on every profile.

Tolerance, stated: the mean loss over the last tenth of the steps of the bf16 and the fp16+scaler run lies
within `curve_tolerance` (10 %) of the fp32 run's loss decrease (first loss − its final loss) from the fp32
final loss. Measured on CPU (100–120 steps): bf16 0.3 %, fp16+scaler 4 % (its skipped steps are updates it
did not make), fp16 unscaled ~100 % (its gradients flush to zero, the loss does not move).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from suite.config import ConfigSection, GptConfig, Profile
from suite.context import StageContext
from suite.facts import Facts, profile_or_none
from suite.results import Expectation, Row, Verdict
from suite.stage_contract import Stage
from suite.verdicts import verdicts_for

NAME = "precision"

V = verdicts_for(NAME)


@dataclass(frozen=True, kw_only=True)
class PrecisionConfig:
    hidden: int = 16
    """Tiny GPT: hidden size (numerics, not speed: the same size on every profile)."""
    layers: int = 1
    """Decoder blocks."""
    heads: int = 2
    """Attention heads."""
    seq_len: int = 8
    """Tokens per sequence."""
    batch: int = 4
    """Sequences per step."""
    vocab: int = 64
    """Vocabulary, tokens."""
    steps: int = 120
    """AdamW steps of each training run."""
    batches: int = 4
    """Fixed batches cycled through (the model can learn them: the loss curve has somewhere to go)."""
    lr: float = 3e-3
    """AdamW's learning rate."""
    grad_shrink_log2: int = -20
    """The loss × 2^this in training and in the underflow probe: activation gradients below 2^-24."""
    overflow_log2: int = 20
    """The overflow probe's loss × 2^this: the largest gradients above fp16's 65504."""
    init_scale_log2: int = 40
    """GradScaler's initial scale 2^this: too large on purpose, so it must skip steps and back off."""
    growth_interval: int = 100
    """GradScaler's growth interval, steps."""
    clip_norm: float = 1.0
    """Global gradient-norm clip, in the units of the unshrunk loss."""
    curve_tolerance: float = 0.10
    """Largest |final loss − fp32's| as a fraction of fp32's loss decrease."""

    def model(self) -> GptConfig:
        return GptConfig(
            vocab=self.vocab,
            hidden=self.hidden,
            layers=self.layers,
            heads=self.heads,
            seq_len=self.seq_len,
            batch=self.batch,
            dtype="float32",
        )


CONFIG = ConfigSection(
    "precision",
    PrecisionConfig,
    {
        "gloo-cpu": PrecisionConfig(steps=100),
        "nccl-gpu": PrecisionConfig(steps=300),
        "nccl-1gpu": PrecisionConfig(steps=300),
    },
)


def estimate(p) -> tuple[float, str]:
    steps = p.profile.section(CONFIG).steps
    return 10.0 + 4 * steps * 0.01, f"4 tiny training runs × {steps} steps (~10 ms each) and a range probe"


def expect(profile: Profile, facts: Facts) -> list[Expectation]:
    pc = profile.section(CONFIG)
    return [
        Expectation(
            stage=NAME,
            case="train",
            metric="loss_gap",
            value=pc.curve_tolerance,
            unit="ratio",
            dtype=run,
            basis="|mean loss of the last tenth − fp32's| ≤ this × fp32's loss decrease",
        )
        for run in ("bf16", "fp16_scaler")
    ]


def run(profile: Profile, ctx: StageContext) -> list[Row]:
    import torch

    from suite.stages.precision.worker import precision_rows

    device = torch.device("cuda", 0) if profile.device == "cuda" else torch.device("cpu")
    pc = profile.section(CONFIG)
    ctx.say(f"range probe and 4 runs × {pc.steps} steps on {device}")
    return precision_rows(pc.model(), device, pc, say=ctx.say)


def curve_summary(rows: list[Row]) -> dict[str, tuple[float, float]]:
    """Per training run: (first loss, mean loss over the last tenth of the steps)."""
    out: dict[str, tuple[float, float]] = {}
    runs = sorted({r.dtype for r in rows if r.case == "train" and r.metric == "loss"})
    for run in runs:
        losses = [
            r.value
            for r in sorted(
                (r for r in rows if r.case == "train" and r.metric == "loss" and r.dtype == run),
                key=lambda r: r.repeat,
            )
        ]
        tail = losses[-max(1, len(losses) // 10) :]
        out[run] = (losses[0], sum(tail) / len(tail))
    return out


def _value(rows, case, metric, dtype) -> float | None:
    found = [r.value for r in rows if r.case == case and r.metric == metric and r.dtype == dtype]
    return found[0] if found else None


def judge(rows: list[Row], expectations: list[Expectation], facts: Facts) -> list[Verdict]:
    prof = profile_or_none(facts)
    pc: PrecisionConfig = prof.section(CONFIG) if prof else PrecisionConfig()
    out = probe_verdicts(rows)
    curves = curve_summary(rows)
    if "fp32" not in curves:
        return out + [
            V.fail(
                "train",
                expected="fp32, bf16, fp16_unscaled and fp16_scaler runs",
                observed=f"runs: {', '.join(curves) or 'none'}",
                reason="no fp32 reference run: see raw/precision/stage.log",
            )
        ]
    first, final = curves["fp32"]
    drop = first - final
    out.append(
        V.check(
            "train.fp32_learns",
            drop > 0.3 * first,
            expected="fp32 loses > 30 % of its first loss",
            observed=f"{first:.3f} → {final:.3f}",
            reason_ok="the reference learns: the curves have a decrease to be measured against",
            reason_bad="the fp32 run does not learn: raise precision.lr or steps",
        )
    )
    gap = {
        run: abs(curves[run][1] - final) / drop if drop > 0 else math.inf for run in curves if run != "fp32"
    }
    for run in ("bf16", "fp16_scaler"):
        g = gap.get(run, math.inf)
        out.append(
            V.check(
                f"curve.{run}",
                g <= pc.curve_tolerance,
                expected=f"final loss within {pc.curve_tolerance:.0%} of fp32's decrease of fp32's "
                f"{final:.3f}",
                observed=f"{curves[run][1]:.3f} ({g:.1%} of the decrease)" if run in curves else "no run",
                reason_ok=f"{run} trains as fp32 does",
                reason_bad=f"{run} leaves fp32's curve: "
                + (
                    "an fp16 run without loss scaling (gradients flushed to zero)?"
                    if run == "fp16_scaler"
                    else "bf16 should need no scaling: check autocast's op coverage"
                ),
            )
        )
    zero = _value(rows, "train", "zero_grad_steps", "fp16_unscaled") or 0
    g = gap.get("fp16_unscaled", 0.0)
    out.append(
        V.check(
            "train.fp16_unscaled_stalls",
            zero > 0 and g > pc.curve_tolerance,
            expected="fp16 without a scaler loses its gradients (steps with every gradient 0) and stalls",
            observed=f"{zero:.0f} steps with every gradient 0; final loss {g:.0%} of fp32's decrease away",
            reason_ok="unscaled fp16 is caught: this is what GradScaler is for",
            reason_bad="the unscaled fp16 run trained: the loss shrink did not reach fp16's range "
            "(lower precision.grad_shrink_log2)",
        )
    )
    out += scaler_verdicts(rows, pc)
    return out


def probe_verdicts(rows: list[Row]) -> list[Verdict]:
    def counts(case, dtype):
        return {m: _value(rows, case, m, dtype) for m in ("grads_zeroed", "grads_nonfinite", "grads_total")}

    under, over = counts("probe.underflow", "fp16"), counts("probe.overflow", "fp16")
    if under["grads_total"] is None or over["grads_total"] is None:
        return [
            V.fail(
                "probe",
                expected="range-probe rows for fp16",
                observed="none",
                reason="the range probe did not run: see raw/precision/stage.log",
            )
        ]
    out = [
        V.check(
            "probe.fp16_underflow",
            under["grads_zeroed"] > 0,
            expected="fp16 without scaling zeroes gradients below 2^-24",
            observed=f"{under['grads_zeroed']:.0f} of {under['grads_total']:.0f} gradient elements became 0",
            reason_ok="fp16 underflow seen, counted",
            reason_bad="no gradient underflowed: the probe's factor "
            "is not small enough to exercise fp16's range",
        )
    ]
    out.append(
        V.check(
            "probe.fp16_overflow",
            over["grads_nonfinite"] > 0,
            expected="fp16 without scaling turns gradients above 65504 into inf/NaN",
            observed=f"{over['grads_nonfinite']:.0f} of {over['grads_total']:.0f} became inf/NaN",
            reason_ok="fp16 overflow seen, counted",
            reason_bad="no gradient overflowed: raise precision.overflow_log2",
        )
    )
    lost = {case: counts(case, "bf16") for case in ("probe.underflow", "probe.overflow")}
    bad = sum((c["grads_zeroed"] or 0) + (c["grads_nonfinite"] or 0) for c in lost.values())
    out.append(
        V.check(
            "probe.bf16_range",
            bad == 0 and all(c["grads_total"] for c in lost.values()),
            expected="bf16 (fp32's exponent) loses no gradient at either factor",
            observed=f"{bad:.0f} gradient elements zeroed or non-finite",
            reason_ok="bf16 needs no loss scaling",
            reason_bad="bf16 lost gradients: check the probe's rows",
        )
    )
    return out


def scaler_verdicts(rows: list[Row], pc: PrecisionConfig) -> list[Verdict]:
    skipped = _value(rows, "train", "skipped_steps", "fp16_scaler")
    bound = pc.init_scale_log2 + pc.steps // pc.growth_interval + 2
    out = [
        V.check(
            "scaler.skipped_steps",
            skipped is not None and 1 <= skipped <= bound,
            expected=f"GradScaler from 2^{pc.init_scale_log2} skips 1 … {bound} steps (each halves the "
            f"scale)",
            observed=f"{skipped:.0f} skipped" if skipped is not None else "no scaler run",
            reason_ok="overflowing steps are skipped, the scale backs off, training recovers",
            reason_bad="no step skipped from an oversized scale: the run was not scaled"
            if not skipped
            else "more skips than halvings from the initial scale: the scale never settles",
        )
    ]
    ratio, scale = (
        _value(rows, "train", "scaled_norm_ratio", "fp16_scaler"),
        _value(rows, "train", "scale_at_ratio", "fp16_scaler"),
    )
    clipped = {run: _value(rows, "train", "clipped_steps", run) for run in ("fp32", "fp16_scaler")}
    ok = ratio is not None and scale is not None and math.isfinite(ratio) and abs(ratio / scale - 1) < 1e-2
    out.append(
        V.check(
            "clip.after_unscale",
            ok,
            expected="scaled gradients' norm = scale × the unscaled norm "
            "(clip_grad_norm_ after scaler.unscale_)",
            observed=f"ratio {ratio:.4g} at scale {scale:.4g}; clipped steps fp32 {clipped['fp32']}, "
            f"fp16+scaler {clipped['fp16_scaler']} of {pc.steps}"
            if ok or ratio is not None
            else "no scaled step",
            reason_ok="clipping before unscale_ would clip at clip_norm / scale: it is done after",
            reason_bad="the scaled norm is not scale × the true norm: clipping sees the wrong gradients",
        )
    )
    return out


def headline(rows: list[Row], verdicts: list[Verdict], expectations: list[Expectation]) -> str | None:
    """The final losses of bf16 and fp16 with GradScaler against fp32's, as a share of fp32's decrease,
    against the allowed gap; whether fp16 without a scaler stalled as it should."""
    from suite import headlines as hl

    curves = curve_summary(rows)  # (first loss, mean of the last tenth), as judge() holds them
    if "fp32" not in curves or curves["fp32"][0] == curves["fp32"][1]:
        return None
    first, final = curves["fp32"]
    parts = [f"final loss fp32 {final:.3f}"]  # "off": |final − fp32's| as a share of fp32's decrease
    for run, name in (("bf16", "bf16"), ("fp16_scaler", "fp16+GradScaler")):
        if run in curves:
            parts.append(
                f"{name} {curves[run][1]:.3f} ({abs(curves[run][1] - final) / (first - final):.1%} off)"
            )
    text = ", ".join(parts)
    gap = hl.matching(expectations, "train", "loss_gap")
    if gap:
        text += f" · expected ≤ {gap[0].value:.0%} of fp32's decrease"
    stall = hl.verdict(verdicts, "precision.train.fp16_unscaled_stalls")
    if stall:
        text += " · fp16 unscaled stalls" if stall.status == "pass" else " · fp16 unscaled did not stall"
    return text


STAGE = Stage(
    row=32,
    after=("baseline",),  # the checklist's one-card rows follow the baseline; reads no facts
    profiles=("gloo-cpu", "nccl-gpu", "nccl-1gpu"),
    title="fp16 without/with GradScaler, bf16, clipping: gradients lost, steps skipped, loss curves",
    measures="fp16 gradients lost without loss scaling, GradScaler's recovery, bf16's range, clipping after "
    "unscale_",
    wrong="an fp16 run that trains without a scaler; bf16 or fp16+scaler loss curves leaving fp32's",
    rehearsal="the same numerics on CPU under autocast to bf16 and fp16: range probe, four tiny training "
    "runs",
    config=CONFIG,
    estimate=estimate,
    expect=expect,
    run=run,
    judge=judge,
    headline=headline,
)
