"""The stage's folder: this declaration; beside it what only this stage runs (figure.py: its figures).
Imported by suite.stages' discovery (runner, plan, ingest, reports); it imports no other stage.
Stage 6 (checklist row 6): DDP with gradient all-reduce overlapped with backward, against after it.

    python -m suite run --profile gloo-cpu --stages overlap

One launch runs every mode (suite/stages/overlap/worker.py): no overlap (no_sync through backward,
then one all-reduce of every gradient), and DDP's bucketed reducer at a small bucket, at DDP's
default (25 MiB, first bucket 1 MiB) and at a large one (100 MiB). Every mode starts from the same
weights and reduces the same global batch, so its gradients must equal one process's gradients
of the whole batch, elementwise. Then each mode's steps are timed.

The α-β model (suite/costmodel/buckets.py) says how much communication each mode can hide: every
bucket but the last all-reduces under the rest of backward. Small buckets pay 2(n−1)α each, so
on a GPU a mode slower than no overlap at all means the buckets are too small.

The same launch watches each overlapped mode's buckets (suite/stages/overlap/ddp_watch.py, judged in
suite/stages/overlap/watch.py): which parameters DDP put in which bucket after its rebuild, against the
bucket model's layout, and when each bucket's all-reduce was launched and completed against the
gradients backward computed, drawn as a timeline (suite/stages/overlap/figure.py).
"""

from __future__ import annotations

import dataclasses
import json

from suite import headlines as hl
from suite.config import GptConfig, Profile
from suite.context import StageContext
from suite.costmodel.buckets import (
    MIB,
    NO_OVERLAP,
    OverlapMode,
    caps_for,
    ddp_bucket_layout,
    no_overlap_prediction,
    overlap_prediction,
)
from suite.costmodel.tolerance import CHECK_DTYPE, tolerance
from suite.facts import Facts, alpha_beta
from suite.facts import profile as profile_of
from suite.hardware.card_fit import card_bytes
from suite.hardware.stage_fit import scaling_model, scaling_sized
from suite.results import Expectation, Row, Verdict
from suite.stage_contract import Stage
from suite.stages._parallel_ranks import subset_expectations, subset_note
from suite.stages.overlap.watch import named_gradient_sizes, watch_verdicts
from suite.values import is_missing
from suite.verdicts import judges_performance, verdicts_for

NAME = "overlap"

CONFIG = None  # the profile's `model`


def estimate(p) -> tuple[float, str]:
    """`make plan`'s minutes for this stage (p: suite.plan.hours.PlanInputs)."""
    compute, comm = p.step_s / p.parallel_ranks, p.dp_comm_s(p.parallel_ranks)
    seconds = 2 * p.assume.torchrun_launch_s + p.steps * ((compute + comm) + max(compute, comm))
    return seconds, "DDP without overlap (compute + comm), then with (max of the two)"


SMALL_CAP_MB = 1.0
LARGE_CAP_MB = 100.0
# Backward does two of a training step's three matmul passes (6N FLOPs per token: 2N forward, 4N backward).
BACKWARD_SHARE = 2 / 3


# ---------------------------------------------------------------- modes and model facts


def gradient_sizes(cfg: GptConfig) -> list[int]:
    """Bytes of every gradient in the order backward produces them (the reverse of registration), without
    allocating."""
    return [nbytes for _, nbytes in named_gradient_sizes(cfg)]


def small_cap_mb(grad_bytes: int) -> float:
    """1 MiB; for models whose gradients are under 64 MiB (the rehearsal's 165 KB), a sixteenth of them
    (one significant digit), so the small mode still splits the gradients into many buckets."""
    if grad_bytes >= 64 * MIB:
        return SMALL_CAP_MB
    return float(f"{grad_bytes / 16 / MIB:.1g}")


def modes(cfg: GptConfig) -> list[str]:
    """The workload's --modes: no overlap first (the others are compared with it), small, default, large."""
    return ["none", f"{small_cap_mb(sum(gradient_sizes(cfg))):g}", "default", f"{LARGE_CAP_MB:g}"]


def mode_of(text: str) -> OverlapMode:
    return OverlapMode.parse(text)


# ---------------------------------------------------------------- expect


def expect(profile: Profile, facts: Facts) -> list[Expectation]:
    alpha, beta, basis = alpha_beta(facts, profile.device)
    n = profile.parallel_ranks
    model = scaling_model(profile, facts)  # sized to the card (suite/hardware/stage_fit.py)
    sizes = gradient_sizes(model)
    grad_bytes = sum(sizes)
    out = subset_expectations(NAME, profile, "DDP's batch")
    for text in modes(model):
        mode = mode_of(text)
        if mode.overlap:
            cap, first = caps_for(mode.bucket_cap_mb)
            layout = ddp_bucket_layout(sizes, cap, first)
            pred = overlap_prediction(layout, n, alpha, beta)
            how = (
                f"{len(layout)} buckets (cap {cap / MIB:g} MiB, first {first / MIB:g} MiB) of "
                f"{grad_bytes:,} B"
            )
        else:
            pred = no_overlap_prediction(grad_bytes, n, alpha, beta)
            how = f"one all-reduce of {grad_bytes:,} B after backward"
        common = dict(stage=NAME, case="ddp", world=n, overlap=mode.label, dtype=profile.model.dtype)
        b = f"ring α-β over {n} ranks, {basis}; {how}"
        out += [
            Expectation(metric="buckets", value=pred.buckets, unit="count", basis=how, **common),
            Expectation(metric="predicted_comm_s", value=pred.comm_s, unit="s", basis=b, **common),
            Expectation(
                metric="predicted_hidden_comm_s",
                value=pred.hidden_s,
                unit="s",
                basis=b + "; every bucket but the last hides under backward (backward taken as long enough)",
                **common,
            ),
        ]
    return out


# ---------------------------------------------------------------- run


def run(profile: Profile, ctx: StageContext) -> list[Row]:
    model = scaling_model(profile, ctx.facts)
    wanted = modes(model)
    ctx.say(
        f"DDP modes {', '.join(mode_of(m).label for m in wanted)}{subset_note(profile)}: gradients checked, "
        "steps timed"
    )
    args = ["--model", json.dumps(dataclasses.asdict(model)), "--modes", ",".join(wanted)]
    rows = ctx.torchrun("suite.stages.overlap.worker", args, tag="ddp", nproc=profile.parallel_ranks).rows()
    alpha, beta, _ = alpha_beta(ctx.facts, profile.device)
    return rows + derived_rows(rows, profile.parallel_ranks, alpha, beta)


def _value(rows: list[Row], label: str, metric: str) -> float | None:
    for r in rows:
        if r.overlap == label and r.metric == metric and not is_missing(r.value):
            return r.value
    return None


def derived_rows(rows: list[Row], n: int, alpha_s: float, beta_Bps: float) -> list[Row]:
    """Per overlapped mode: the measured saving against no overlap, and the α-β hidden communication
    for the bucket sizes DDP actually used, bounded by the measured backward (2/3 of forward+backward)."""
    base = _value(rows, NO_OVERLAP, "step_time_s")
    compute = _value(rows, NO_OVERLAP, "compute_s")
    backward = compute * BACKWARD_SHARE if compute is not None else None
    out = []
    for r in rows:
        if r.metric != "buckets" or not r.text:
            continue
        layout = [int(x) for x in r.text.split()]
        pred = overlap_prediction(layout, n, alpha_s, beta_Bps, backward_s=backward)
        common = dict(
            stage=NAME, case="ddp", world=r.world, overlap=r.overlap, dtype=r.dtype, source="alpha-beta"
        )
        out.append(Row(metric="predicted_hidden_comm_s", value=pred.hidden_s, unit="s", **common))
        step = _value(rows, r.overlap, "step_time_s")
        if base is not None and step is not None:
            out.append(
                Row(
                    metric="step_time_saving_s",
                    value=base - step,
                    unit="s",
                    **{**common, "source": "measured"},
                )
            )
    return out


# ---------------------------------------------------------------- judge

VERDICTS = verdicts_for(NAME)


def grad_tolerance(dtype: str | None) -> float:
    return tolerance(dtype or CHECK_DTYPE)


def judge(rows: list[Row], expectations: list[Expectation], facts: Facts) -> list[Verdict]:
    cfg = scaling_sized(profile_of(facts).model, card_bytes(facts))[0]
    labels = list(dict.fromkeys(e.overlap for e in expectations if e.overlap)) or [
        mode_of(m).label for m in modes(cfg)
    ]
    out: list[Verdict] = []
    for label in labels:
        diff = _value(rows, label, "max_grad_diff")
        vs_first = next(
            (r.value for r in rows if r.overlap == label and r.metric.startswith("max_grad_diff_vs_")), None
        )
        dtype = next((r.dtype for r in rows if r.overlap == label and r.metric == "max_grad_diff"), None)
        tol = grad_tolerance(dtype)
        if diff is None:
            out.append(
                VERDICTS.fail(
                    f"grads.{label}",
                    expected=f"≤ {tol:g}",
                    observed="no gradient check row",
                    reason=f"mode {label} reported no gradient check: see raw/{NAME}/ddp.rank0.log",
                )
            )
            continue
        worst = max(diff, vs_first or 0.0)
        out.append(
            VERDICTS.check(
                f"grads.{label}",
                worst <= tol,
                expected=f"max |grad − one process's| ≤ {tol:g} ({dtype})",
                observed=f"{diff:.3g} vs one process, "
                f"{vs_first if vs_first is not None else float('nan'):.3g} vs {labels[0]}",
                reason_ok="gradients after the step equal one process's and the other modes', elementwise",
                reason_bad=f"{label} reduces different gradients: the same weights and batch must give the "
                f"same "
                f"average; check how {label} reduces (bucketing, no_sync, the division by the world size)",
            )
        )
    out += performance_verdicts(rows, labels, facts)
    by_label = {mode_of(m).label: mode_of(m) for m in modes(cfg)}
    out += watch_verdicts(rows, {label: by_label[label] for label in labels if label in by_label}, cfg, facts)
    return out


def performance_verdicts(rows: list[Row], labels: list[str], facts: dict) -> list[Verdict]:
    base = _value(rows, NO_OVERLAP, "step_time_s")
    out = []
    for label in labels:
        if label == NO_OVERLAP:
            continue
        step = _value(rows, label, "step_time_s")
        buckets = _value(rows, label, "buckets")
        hidden = _value(rows, label, "predicted_hidden_comm_s")
        expected = f"step ≤ no overlap's ({base * 1e3:.1f} ms)" if base is not None else "a step time"
        if step is None or base is None:
            out.append(
                VERDICTS.fail(
                    f"speed.{label}",
                    expected=expected,
                    observed="no step time",
                    reason=f"no step time for {label} or {NO_OVERLAP}: see raw/{NAME}/ddp.rank0.log",
                )
            )
            continue
        observed = (
            f"{step * 1e3:.1f} ms vs {base * 1e3:.1f} ms without overlap "
            f"(saves {(base - step) * 1e3:.1f} ms; α-β hides {(hidden or 0.0) * 1e3:.2f} ms"
            f"{f'; {buckets:.0f} buckets' if buckets is not None else ''})"
        )
        if not judges_performance(facts):
            out.append(VERDICTS.cpu_skip(f"speed.{label}", expected, observed))
            continue
        cap = label.removeprefix("bucket_")
        out.append(
            VERDICTS.check(
                f"speed.{label}",
                step <= base,
                expected=expected,
                observed=observed,
                reason_ok=f"overlap with {cap} buckets is no slower than communicating after backward",
                reason_bad=f"buckets too small: communication fragmented (bucket_cap_mb {cap}"
                f"{f', {buckets:.0f} buckets' if buckets is not None else ''}): each all-reduce pays the "
                f"latency α; raise bucket_cap_mb",
                bad="warn",
            )
        )
    return out


def headline(rows: list[Row], verdicts: list[Verdict], expectations: list[Expectation]) -> str | None:
    """The best bucket setting's step-time saving over no overlap."""
    savings = hl.matching(rows, "ddp", "step_time_saving_s", source="measured")
    base = hl.matching(rows, "ddp", "step_time_s", overlap="no_overlap")
    if not savings or not base:
        return None
    best = max(savings, key=lambda r: r.value)
    return (
        f"best overlap ({best.overlap}) saves {hl.seconds(best.value)} of a {hl.seconds(base[0].value)} step "
        f"({best.value / base[0].value:+.0%})"
    )


STAGE = Stage(
    row=6,
    after=("bandwidth", "tp", "dp", "zero"),  # α-β; the checklist runs the scaling experiments together first
    title="DDP with communication overlapped vs not",
    measures="DDP step time with the gradient all-reduce overlapped with backward (three bucket sizes) and "
    "after it",
    wrong="a step slower with overlap on than off: buckets too small, communication fragmented",
    rehearsal="every mode on gloo, one launch; each mode's gradients equal one process's, elementwise",
    config=CONFIG,
    estimate=estimate,
    expect=expect,
    run=run,
    judge=judge,
    headline=headline,
)
