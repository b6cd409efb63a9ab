"""The stage's folder: this declaration; beside it what only this stage runs (figure.py: its figures).
Imported by suite.stages' discovery (runner, plan, ingest, reports); it imports no other stage.
Stage 7 — dp: DDP over 1/2/4(/8) ranks with a fixed global batch, beside the α-β model's decay.

    python -m suite run --stages dp --profile nccl-gpu
    python -m suite run --stages dp --profile gloo-cpu      # parameters equal single-process training

One launch (suite/stages/dp/worker.py) measures every degree through sub-groups. With a fixed
global batch of B sequences, d ranks train B/d each; per-rank throughput ideally stays flat and
in practice decays by the gradient all-reduce. The α-β model (α, β fitted by the bandwidth
stage) predicts that decay from the baseline's step time:
    efficiency(d) = (t₁/d) / (t₁/d + 2(d−1)(α + G/(dβ)))          (suite/costmodel/scaling_expectations.py)
After warm-up + timed steps, every degree's parameters are compared elementwise with one
process trained on the whole batches (float32).

On a multi-node profile the launch spans every node and the degrees go on across whole nodes (2 × 8:
1, 2, 4, 8 within node 0, then 16; Profile.dp_degrees); a degree within a node is predicted with the
intra-node α-β, one across nodes with the inter-node fit (suite/facts.py alpha_beta_at; the formula in
suite/costmodel/alphabeta.py allreduce_across_nodes_s), and the verdicts say which degree was held to which.
"""

from __future__ import annotations

from suite import headlines as hl
from suite.config import Profile
from suite.context import StageContext
from suite.costmodel.scaling_expectations import DP_MARGIN, dp_efficiency
from suite.costmodel.sizing import parameter_count
from suite.costmodel.tolerance import CHECK_DTYPE, golden_tolerance
from suite.dtypes import DTYPE_BYTES
from suite.facts import Facts, alpha_beta_at, baseline_step_s, ingested
from suite.facts import profile as profile_of
from suite.hardware.gpu_sampler import period_for, sampling, throttle_verdicts
from suite.hardware.stage_fit import scaling_dp_model, scaling_model
from suite.results import Expectation, Row, Verdict
from suite.stage_contract import Stage
from suite.stages._across_nodes import NETWORK_HINT, NODES_METRIC, held_to, nodes_verdict, place, ranks_label
from suite.stages._golden import golden_verdicts, tolerance_after_training
from suite.verdicts import judges_performance, verdicts_for

NAME = "dp"

CONFIG = None  # the profile's `model` and `degrees`


def estimate(p) -> tuple[float, str]:
    """`make plan`'s minutes for this stage (p: suite.plan.hours.PlanInputs)."""
    degrees = p.dp_degrees
    step = p.dp_step_s
    seconds = sum(p.assume.torchrun_launch_s + p.steps * (step / d + p.dp_comm_s(d)) for d in degrees)
    across = [d for d in degrees if d > p.gpus_per_node]
    return seconds, (
        f"DP = {'/'.join(map(str, degrees))}: compute ÷ DP + one gradient all-reduce "
        f"({p.grad_bytes / 1e9:.2f} GB)"
        + (
            f"; DP = {'/'.join(map(str, across))} across nodes at the inter-node β, global batch {p.dp_batch}"
            if across
            else ""
        )
    )


def grad_bytes(profile: Profile, facts: dict | None = None) -> float:
    model = scaling_model(profile, facts)
    return parameter_count(model) * DTYPE_BYTES[model.dtype]


def expect(profile: Profile, facts: Facts) -> list[Expectation]:
    model = scaling_dp_model(profile, facts)  # sized to the card (suite/hardware/stage_fit.py)
    golden = golden_tolerance(model, model.warmup_steps + model.steps)  # the check's steps
    g = grad_bytes(profile, facts)
    step_1, step_basis = one_rank_step(profile, facts)
    out = []
    for d in profile.dp_degrees:
        out.append(
            Expectation(
                stage=NAME,
                case="params_after_training",
                metric="max_abs_error",
                value=golden.bound,
                unit="abs",
                world=d,
                dtype=CHECK_DTYPE,
                basis=f"at most {golden.describe()} (suite/costmodel/tolerance.py)",
            )
        )
        if step_1:
            alpha, beta, ab_basis = alpha_beta_at(facts, profile, d)
            eff = dp_efficiency(step_1, d, g, alpha, beta)
            tokens = model.batch * model.seq_len
            where = place(profile, d)
            basis = (
                f"{step_basis}; {g / 1e6:.4g} MB of gradients all-reduced per step"
                + (f" {where}" if where else "")
                + f"; {ab_basis}"
            )
            out += [
                Expectation(
                    stage=NAME,
                    case="train_step",
                    metric="efficiency",
                    value=eff,
                    unit="ratio",
                    basis=basis,
                    world=d,
                    dtype=model.dtype,
                ),
                Expectation(
                    stage=NAME,
                    case="train_step",
                    metric="tokens_per_s_per_rank",
                    value=eff * tokens / step_1,
                    unit="tokens/s",
                    basis=basis,
                    world=d,
                    dtype=model.dtype,
                ),
            ]
    return out


def one_rank_step(profile: Profile, facts: Facts) -> tuple[float | None, str]:
    """t₁, one rank's step on dp's global batch, and how it was had: the baseline's step, scaled by the batch
    when dp trains a larger one (a multi-node profile, Profile.dp_model: compute grows with the tokens)."""
    step = baseline_step_s(facts)
    if not step:
        return None, ""
    ratio = profile.dp_model.batch / profile.model.batch
    if ratio == 1:
        return step, f"baseline step {step * 1e3:.3g} ms"
    return step * ratio, (
        f"baseline step {step * 1e3:.3g} ms × {ratio:g} for the global batch of "
        f"{profile.dp_model.batch} (every DP degree divides it)"
    )


def run(profile: Profile, ctx: StageContext) -> list[Row]:
    from suite.workloads.worker_cli import model_args

    degrees = ",".join(str(d) for d in profile.dp_degrees)
    across = len(profile.nodes) > 1
    ctx.say(
        f"DDP over {degrees} ranks, global batch {profile.dp_model.batch}"
        + (f", {profile.nproc} per node on {len(profile.nodes)} nodes" if across else "")
        + ": reference, then each degree"
    )
    args = [*model_args(scaling_dp_model(profile, ctx.facts)), "--degrees", degrees] + (
        ["--record-nodes"] if across else []
    )
    # Across nodes every node starts its nproc ranks (the world is the largest degree); on one node only as
    # many as the largest degree needs.
    with sampling(ctx.raw_dir, NAME, period_ms=period_for(profile)) as samples:  # power and clocks meanwhile
        rows = ctx.torchrun(
            "suite.stages.dp.worker",
            args,
            tag="dp",
            nproc=profile.nproc if across else max(profile.dp_degrees),
        ).rows()
    return rows + efficiency_rows(rows) + samples.rows()


def efficiency_rows(rows: list[Row]) -> list[Row]:
    """Measured efficiency(d) = tokens/s per rank at d ÷ tokens/s at 1 (same launch)."""
    timed = [r for r in rows if r.case == "train_step" and r.metric == "tokens_per_s_per_rank"]
    per_rank = {r.world: r.value for r in timed}
    one = per_rank.get(1)
    if not one:
        return []
    dtype = timed[0].dtype
    return [
        Row(
            stage=NAME,
            case="train_step",
            metric="efficiency",
            value=v / one,
            unit="ratio",
            world=d,
            dtype=dtype,
            source="torch",
        )
        for d, v in sorted(per_rank.items())
    ]


VERDICTS = verdicts_for(NAME)


def judge(rows: list[Row], expectations: list[Expectation], facts: Facts) -> list[Verdict]:
    profile = profile_of(facts)
    out = golden_verdicts(
        NAME,
        rows,
        tolerance_after_training(facts, scaling_dp_model(profile, facts)),
        "world",
        profile.dp_degrees,
        lambda d: f"DDP over {ranks_label(profile, d)}" if profile.nodes[1:] else f"DDP over {d} rank(s)",
    )
    out += nodes_verdict(NAME, rows, profile)
    out += throttle_verdicts(rows, stage=NAME, on_gpu=judges_performance(facts), ingested=ingested(facts))
    measured = {r.world: r.value for r in rows if r.case == "train_step" and r.metric == "efficiency"}
    predicted = {
        e.world: e.value for e in expectations if e.case == "train_step" and e.metric == "efficiency"
    }
    observed = ", ".join(
        f"{ranks_label(profile, d)}: {measured[d]:.2f} (α-β {predicted[d]:.2f})"
        if d in predicted
        else f"{ranks_label(profile, d)}: {measured[d]:.2f}"
        for d in sorted(measured)
    )
    held = held_to(facts, profile, sorted(measured) or profile.dp_degrees)
    expected = f"per-rank efficiency ≥ {DP_MARGIN:.0%} of the α-β prediction" + (f" ({held})" if held else "")
    if not judges_performance(facts):
        return out + [VERDICTS.cpu_skip("decay", expected, observed)]
    if not predicted:
        return out + [
            VERDICTS.skip(
                "decay",
                expected=expected,
                observed=observed or "no efficiency rows",
                reason="no baseline step time to predict from: rerun the baseline stage first",
            )
        ]
    worse = [d for d in sorted(measured) if d in predicted and measured[d] < DP_MARGIN * predicted[d]]
    network = [d for d in worse if d > profile.nproc and len(profile.nodes) > 1]
    out.append(
        VERDICTS.check(
            "decay",
            not worse,
            bad="warn",
            expected=expected,
            observed=observed,
            reason_ok="the decay is what the α-β model allows"
            + (" within the node and across nodes" if held else ""),
            reason_bad=f"per-rank throughput at {', '.join(ranks_label(profile, d) for d in worse)} decays "
            f"more than "
            f"the gradient all-reduce explains: check DDP's bucketing (bucket_cap_mb) and overlap (see the "
            f"overlap stage), and whether a small per-rank batch leaves the card underused"
            + (f"; across nodes also {NETWORK_HINT}" if network else ""),
        )
    )
    return out


def headline(rows: list[Row], verdicts: list[Verdict], expectations: list[Expectation]) -> str | None:
    """Scaling efficiency at the largest world against the expected one (across how many nodes, where it
    crossed)."""
    top = hl.last(rows, "train_step", "efficiency", key="world")
    if top is None:
        return None
    want = hl.matching(expectations, "train_step", "efficiency", world=top.world)
    spanned = [r for r in hl.matching(rows, "train_step", NODES_METRIC, world=top.world) if r.value > 1]
    return (
        f"DP={top.world}"
        + (f" across {spanned[0].value:.0f} nodes" if spanned else "")
        + f" scaling efficiency {top.value:.0%}"
        + (f" · expected {want[0].value:.0%}" if want else "")
    )


STAGE = Stage(
    row=7,
    after=("bandwidth", "baseline"),  # α-β for the prediction, the one-card step time for the efficiency
    title="DDP over 1/2/4/8 cards",
    measures="tokens/s per rank under DDP over 1/2/4(/8) ranks with a fixed global batch",
    wrong="per-rank throughput decaying more than the α-β model predicts (gradients not bucketed?)",
    rehearsal="1/2/4 ranks on gloo; parameters after training equal single-process training",
    config=CONFIG,
    estimate=estimate,
    expect=expect,
    run=run,
    judge=judge,
    headline=headline,
)
