"""Stage 7 — dp: DDP over 1/2/4(/8) ranks with a fixed global batch, beside the α-β model's decay.

    python -m suite run --stages dp --profile nccl-gpu
    python -m suite run --stages dp --profile gloo-cpu      # parameters equal single-process training

One launch (suite/workloads/dp_run.py) measures every degree through sub-groups. With a fixed
global batch of B sequences, d ranks train B/d each; per-rank throughput ideally stays flat and
in practice decays by the gradient all-reduce. The α-β model (α, β fitted by the bandwidth
stage) predicts that decay from the baseline's step time:
    efficiency(d) = (t₁/d) / (t₁/d + 2(d−1)(α + G/(dβ)))          (suite/costmodel/scaling_expectations.py)
After warm-up + timed steps, every degree's parameters are compared elementwise with one
process trained on the whole batches (float32).
"""

from __future__ import annotations

from ..config import Profile
from ..context import StageContext
from ..costmodel.scaling_expectations import DP_MARGIN, dp_efficiency
from ..dtypes import DTYPE_BYTES
from ..facts import alpha_beta
from ..costmodel.sizing import parameter_count
from ..costmodel.tolerance import CHECK_DTYPE, golden_tolerance
from ..results import Expectation, Row, Verdict
from ..verdicts import judges_performance, verdicts_for
from ._golden import golden_verdicts, tolerance_after_training
from .. import headlines as hl

STAGE = "dp"
MEASURES = "tokens/s per rank under DDP over 1/2/4(/8) ranks with a fixed global batch"
WRONG = "per-rank throughput decaying more than the α-β model predicts (gradients not bucketed?)"
REHEARSAL = "1/2/4 ranks on gloo; parameters after training equal single-process training"

ROW = 7
AFTER = ("bandwidth", "baseline")  # α-β for the prediction, the one-card step time for the efficiency
TITLE = "DDP over 1/2/4/8 cards"
CONFIG = None  # the profile's `model` and `degrees`


def estimate(p) -> tuple[float, str]:
    """`make plan`'s minutes for this stage (p: suite.plan.PlanInputs)."""
    seconds = sum(p.assume.torchrun_launch_s + p.steps * (p.step_s / d + p.dp_comm_s(d)) for d in p.profile.degrees)
    return seconds, (f"DP = {'/'.join(map(str, p.profile.degrees))}: compute ÷ DP + one gradient all-reduce "
                     f"({p.grad_bytes / 1e9:.2f} GB)")


def grad_bytes(profile: Profile) -> float:
    return parameter_count(profile.model) * DTYPE_BYTES[profile.model.dtype]


def expect(profile: Profile, facts: dict) -> list[Expectation]:
    alpha, beta, ab_basis = alpha_beta(facts, profile.device)
    golden = golden_tolerance(profile.model, profile.model.warmup_steps + profile.model.steps)  # the check's steps
    g = grad_bytes(profile)
    step_1 = (facts.get("baseline") or {}).get("step_time_s")
    out = []
    for d in profile.degrees:
        out.append(Expectation(stage=STAGE, case="params_after_training", metric="max_abs_error",
                               value=golden.bound, unit="abs", world=d, dtype=CHECK_DTYPE,
                               basis=f"at most {golden.describe()} (suite/costmodel/tolerance.py)"))
        if step_1:
            eff = dp_efficiency(step_1, d, g, alpha, beta)
            tokens = profile.model.batch * profile.model.seq_len
            basis = f"baseline step {step_1 * 1e3:.3g} ms; {g / 1e6:.4g} MB of gradients all-reduced per step; {ab_basis}"
            out += [Expectation(stage=STAGE, case="train_step", metric="efficiency", value=eff, unit="ratio",
                                basis=basis, world=d, dtype=profile.model.dtype),
                    Expectation(stage=STAGE, case="train_step", metric="tokens_per_s_per_rank",
                                value=eff * tokens / step_1, unit="tokens/s", basis=basis, world=d,
                                dtype=profile.model.dtype)]
    return out


def run(profile: Profile, ctx: StageContext) -> list[Row]:
    from ..workloads.worker_cli import model_args

    degrees = ",".join(str(d) for d in profile.degrees)
    ctx.say(f"DDP over {degrees} ranks, global batch {profile.model.batch}: reference, then each degree")
    rows = ctx.torchrun("suite.workloads.dp_run", [*model_args(profile.model), "--degrees", degrees], tag="dp",
                        nproc=max(profile.degrees)).rows()
    return rows + efficiency_rows(rows)


def efficiency_rows(rows: list[Row]) -> list[Row]:
    """Measured efficiency(d) = tokens/s per rank at d ÷ tokens/s at 1 (same launch)."""
    timed = [r for r in rows if r.case == "train_step" and r.metric == "tokens_per_s_per_rank"]
    per_rank = {r.world: r.value for r in timed}
    one = per_rank.get(1)
    if not one:
        return []
    dtype = timed[0].dtype
    return [Row(stage=STAGE, case="train_step", metric="efficiency", value=v / one, unit="ratio", world=d,
                dtype=dtype, source="torch") for d, v in sorted(per_rank.items())]


VERDICTS = verdicts_for(STAGE)


def judge(rows: list[Row], expectations: list[Expectation], facts: dict) -> list[Verdict]:
    out = golden_verdicts(STAGE, rows, tolerance_after_training(facts), "world", facts["profile"]["degrees"],
                          "DDP over {key} rank(s)")
    measured = {r.world: r.value for r in rows if r.case == "train_step" and r.metric == "efficiency"}
    predicted = {e.world: e.value for e in expectations if e.case == "train_step" and e.metric == "efficiency"}
    observed = ", ".join(f"{d} ranks: {measured[d]:.2f} (α-β {predicted[d]:.2f})" if d in predicted
                         else f"{d} ranks: {measured[d]:.2f}" for d in sorted(measured))
    expected = f"per-rank efficiency ≥ {DP_MARGIN:.0%} of the α-β prediction"
    if not judges_performance(facts):
        return out + [VERDICTS.cpu_skip("decay", expected, observed)]
    if not predicted:
        return out + [VERDICTS.skip("decay", expected=expected, observed=observed or "no efficiency rows",
                                    reason="no baseline step time to predict from: rerun the baseline stage first")]
    worse = [d for d in sorted(measured) if d in predicted and measured[d] < DP_MARGIN * predicted[d]]
    out.append(VERDICTS.check(
        "decay", not worse, bad="warn", expected=expected, observed=observed,
        reason_ok="the decay is what the α-β model allows",
        reason_bad=f"per-rank throughput at {', '.join(map(str, worse))} ranks decays more than the gradient "
                   f"all-reduce explains: check DDP's bucketing (bucket_cap_mb) and overlap (see the overlap "
                   f"stage), and whether a small per-rank batch leaves the card underused"))
    return out


def headline(rows: list[Row], verdicts: list[Verdict], expectations: list[Expectation]) -> str | None:
    """Scaling efficiency at the largest world against the expected one."""
    top = hl.last(rows, "train_step", "efficiency", key="world")
    if top is None:
        return None
    want = hl.matching(expectations, "train_step", "efficiency", world=top.world)
    return (f"DP={top.world} scaling efficiency {top.value:.0%}"
            + (f" · expected {want[0].value:.0%}" if want else ""))
