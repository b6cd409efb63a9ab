"""The stage's folder: this declaration; beside it what only this stage runs (figure.py: its figures).
Imported by suite.stages' discovery (runner, plan, ingest, reports); it imports no other stage.
Stage 5 — tp: the same model under tensor parallelism at every degree, checked before it is timed.

    python -m suite run --stages tp --profile nccl-gpu     # TP = 1/2/4/8, bf16 timing
    python -m suite run --stages tp --profile gloo-cpu     # TP = 1/2/4 on gloo: the golden comparison is real

One launch (suite/stages/tp/worker.py) measures every degree through sub-meshes. Before any
timing, each degree's sharded forward and backward (torch's ColwiseParallel/RowwiseParallel with
sequence parallelism, suite/workloads/parallel_plans.py) is compared elementwise with the
single-process forward and backward on the same weights and input, in float32: logits, loss,
every gradient, and a sequence-sharded attention (RoPE positions following the shard).
Speedup is against the baseline stage's step time (facts["baseline"]), or TP=1 of this launch.
"""

from __future__ import annotations

import dataclasses
import math

from suite import headlines as hl
from suite.config import Profile
from suite.context import StageContext
from suite.costmodel.tolerance import CHECK_DTYPE, Tolerance, golden_tolerance
from suite.facts import Facts
from suite.facts import profile as profile_of
from suite.hardware.stage_fit import scaling_model
from suite.results import Expectation, Row, Verdict
from suite.stage_contract import Stage
from suite.verdicts import judges_performance, verdicts_for

NAME = "tp"

CONFIG = None  # the profile's `model` and `degrees`


def estimate(p) -> tuple[float, str]:
    """`make plan`'s minutes for this stage (p: suite.plan.hours.PlanInputs)."""
    m = p.profile.model
    activation_bytes = m.batch * m.seq_len * m.hidden * p.dtype_bytes
    seconds = sum(
        p.assume.torchrun_launch_s
        + p.steps * (p.step_s / d + 4 * m.layers * p.collective_s("all_reduce", activation_bytes, d))
        for d in p.profile.degrees
    )
    return seconds, (
        f"TP = {'/'.join(map(str, p.profile.degrees))}: compute ÷ TP + 4 activation all-reduces per layer"
    )


GOLDEN_CASES = ("logits", "loss", "grads", "sequence_sharded_attention")


def expect(profile: Profile, facts: Facts) -> list[Expectation]:
    out = []
    for d in profile.degrees:
        if d > 1:
            out += [
                Expectation(
                    stage=NAME,
                    case=case,
                    metric="max_abs_error",
                    value=tol.bound,
                    unit="abs",
                    basis=f"at most {tol.describe()} (suite/costmodel/tolerance.py)",
                    tp=d,
                    world=d,
                    dtype=CHECK_DTYPE,
                )
                for case, tol in case_tolerances(
                    golden_tolerance(scaling_model(profile, facts), 0), profile.model.vocab
                ).items()
            ]
        out.append(
            Expectation(
                stage=NAME,
                case="train_step",
                metric="speedup",
                value=float(d),
                unit="ratio",
                basis="ideal: d cards, d× faster (communication unaccounted)",
                tp=d,
                world=d,
                dtype=profile.model.dtype,
            )
        )
    return out


def run(profile: Profile, ctx: StageContext) -> list[Row]:
    from suite.workloads.worker_cli import model_args

    degrees = ",".join(str(d) for d in profile.degrees)
    ctx.say(
        f"TP = {degrees}: golden comparison, then timed steps (one launch of {max(profile.degrees)} ranks)"
    )
    rows = ctx.torchrun(
        "suite.stages.tp.worker",
        [*model_args(scaling_model(profile, ctx.facts)), "--degrees", degrees],
        tag="tp",
        nproc=max(profile.degrees),
    ).rows()
    return rows + speedup_rows(rows, ctx.facts.get("baseline") or {})


def speedup_rows(rows: list[Row], baseline: dict) -> list[Row]:
    """speedup(d) = baseline step time ÷ step time at TP=d (TP=1 of the same launch when there is no
    baseline)."""
    timed = [r for r in rows if r.case == "train_step" and r.metric == "step_time_s"]
    steps = {r.tp: r.value for r in timed}
    reference, source = baseline.get("step_time_s"), "baseline"
    if not reference or not math.isfinite(reference):
        reference, source = steps.get(1), "tp=1"
    if not reference:
        return []
    dtype = timed[0].dtype
    return [
        Row(
            stage=NAME,
            case="train_step",
            metric="speedup",
            value=reference / t,
            unit="ratio",
            tp=d,
            world=d,
            dtype=dtype,
            source=f"vs {source}",
        )
        for d, t in sorted(steps.items())
        if t and t > 0
    ]


VERDICTS = verdicts_for(NAME)


def judge(rows: list[Row], expectations: list[Expectation], facts: Facts) -> list[Verdict]:
    prof = profile_of(facts)
    model = scaling_model(prof, facts)  # one forward and backward: no optimizer step
    out = golden_verdicts(
        rows,
        case_tolerances(golden_tolerance(model, 0), model.vocab),
        [d for d in prof.degrees if d > 1],
    )
    speedup = {r.tp: r.value for r in rows if r.case == "train_step" and r.metric == "speedup"}
    share = {r.tp: r.value for r in rows if r.case == "train_step" and r.metric == "comm_share"}
    observed = ", ".join(f"TP={d}: {s:.2f}×" for d, s in sorted(speedup.items()))
    expected = "speedup(4) > speedup(2)"
    if not judges_performance(facts):
        return out + [VERDICTS.cpu_skip("scaling", expected, observed)]
    if 2 not in speedup or 4 not in speedup:
        return out + [
            VERDICTS.skip(
                "scaling",
                expected=expected,
                observed=observed or "no speedup rows",
                reason="TP=2 and TP=4 were not both measured: run with at least 4 processes",
            )
        ]
    causes = stall_causes(share, facts.get("topology") or {})
    out.append(
        VERDICTS.check(
            "scaling",
            speedup[4] > speedup[2],
            bad="warn",
            expected=expected,
            observed=observed,
            reason_ok="TP keeps paying off up to 4 cards",
            reason_bad=f"speedup stalls by TP=4: {causes}",
        )
    )
    return out


def case_tolerances(one_pass: Tolerance, vocab: int) -> dict[str, Tolerance]:
    """Each golden case's tolerance: one forward and backward (no optimizer step); the loss, of order ln V,
    is scaled by it, the rest are values of order one."""
    return {
        case: dataclasses.replace(one_pass, scale=math.log(vocab)) if case == "loss" else one_pass
        for case in GOLDEN_CASES
    }


def golden_verdicts(rows: list[Row], tols: dict[str, Tolerance], degrees: list[int]) -> list[Verdict]:
    """One verdict per degree: every golden case within its tolerance; a missing degree or case fails too."""
    out = []
    for d in degrees:
        errors = {
            r.case: r.value
            for r in rows
            if r.metric == "max_abs_error" and r.tp == d and r.case in GOLDEN_CASES
        }
        missing = [c for c in GOLDEN_CASES if c not in errors]
        worst_case, worst = max(errors.items(), key=lambda kv: _sortable(kv[1]), default=("none", math.nan))
        ok = not missing and all(math.isfinite(v) and v <= tols[c].bound for c, v in errors.items())
        observed = ", ".join(f"{c} {v:.2g}" for c, v in errors.items()) or "no comparison rows"
        if missing:
            reason = f"no comparison for {', '.join(missing)} at TP={d}: see raw/tp/tp.rank0.log"
        elif ok:
            reason = "the sharded model computes what one process computes"
        else:
            reason = (
                f"TP={d} computes something else than one process ({worst_case}: {worst:.3g}): "
                f"check the plan in suite/workloads/parallel_plans.py (a layer sharded on the wrong "
                f"dimension, "
                f"a missing reduction, RoPE positions not following the sequence shard, per-rank seeds)"
            )
        out.append(
            VERDICTS.check(
                f"golden.tp{d}",
                ok,
                expected=(
                    f"max |TP − single process| ≤ {tols['grads'].describe()}; "
                    f"the loss's ≤ {tols['loss'].bound:.2g} (scale ln V)"
                ),
                observed=observed,
                reason=reason,
            )
        )
    return out


def _sortable(value: float) -> float:
    return math.inf if not math.isfinite(value) else value


def stall_causes(comm_share: dict[int, float], topology: dict) -> str:
    """The likely causes of a stalled TP speedup, citing what was measured and what the topology stage
    found."""
    causes = []
    if 4 in comm_share and math.isfinite(comm_share[4]):
        causes.append(
            f"communication takes {comm_share[4]:.0%} of a TP=4 step and is not overlapped "
            f"(every row-parallel layer waits for its reduction)"
        )
    numa = topology.get("numa_nodes") or {}
    if len(numa) > 1:
        causes.append(
            f"the box has {len(numa)} NUMA nodes ({', '.join(f'{k}: CPUs {v}' for k, v in numa.items())}): "
            f"a TP group spanning them crosses the inter-socket link; see the topology stage's GPU pairs"
        )
    if topology.get("nvlink") is False:
        causes.append(
            "the topology stage found no NVLink between the GPUs: TP's per-layer reductions ride PCIe"
        )
    return "; ".join(causes) or "unoverlapped communication or a TP group crossing NUMA nodes (see topology)"


def headline(rows: list[Row], verdicts: list[Verdict], expectations: list[Expectation]) -> str | None:
    """The speedup at the highest TP degree against the ideal (d×)."""
    top = hl.last(rows, "train_step", "speedup", key="tp")
    if top is None:
        return None
    ideal = hl.matching(expectations, "train_step", "speedup", tp=top.tp)
    return f"TP={top.tp} speedup {hl.times(top.value)}" + (
        f" · ideal {hl.times(ideal[0].value)}" if ideal else ""
    )


STAGE = Stage(
    row=5,
    after=("bandwidth", "baseline"),  # α-β for the prediction, the one-card step time for the speedup
    title="TP = 1/2/4/8",
    measures="step time, speedup vs one device and communication share of a step at TP = 1/2/4(/8)",
    wrong="speedup stalling by TP=4 (unoverlapped communication, or a topology crossing NUMA)",
    rehearsal="TP = 1/2/4 on gloo, output and gradients compared elementwise with the single-process forward",
    config=CONFIG,
    estimate=estimate,
    expect=expect,
    run=run,
    judge=judge,
    headline=headline,
)
