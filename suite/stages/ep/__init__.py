"""The stage's folder: this declaration; beside it what only this stage runs (figure.py: its figures).
Imported by suite.stages' discovery (runner, plan, ingest, reports); it imports no other stage.
Stage ep — expert parallelism: a top-k routed mixture of experts spread over the ranks, checked, then timed.

    python -m suite run --stages ep --profile gloo-cpu      # EP = 4 on gloo: the golden comparison is real
    python -m suite run --stages ep --profile nccl-gpu      # EP = 8, bf16 timings

One launch (suite/stages/ep/worker.py). Tokens are dispatched to the experts' ranks and combined back
with all_to_all_single over variable split sizes (exchanged first; the combine uses them reversed).
Against the single-process mixture of experts on the same weights and tokens: the tokens each expert
receives (exactly), the output and the gradients (elementwise; backward through the autograd
all-to-all), and the tokens dropped under the capacity factor — for a uniform and a skewed router.
Then the dispatch all-to-all's bandwidth, step time per capacity factor, and the imbalance's cost.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass

from suite.config import ConfigSection, Profile, ProfileError
from suite.context import StageContext
from suite.costmodel.drill_tolerance import moe_tolerance
from suite.costmodel.tolerance import CHECK_DTYPE, Tolerance
from suite.dtypes import DTYPE_BYTES
from suite.facts import Facts
from suite.facts import profile as profile_of
from suite.hardware.card_fit import card_bytes
from suite.hardware.stage_fit import ep_sized
from suite.results import Expectation, Row, Verdict
from suite.stage_contract import Stage
from suite.stages._parallel_ranks import subset_expectations, subset_note
from suite.verdicts import judges_performance, verdicts_for

NAME = "ep"
V = verdicts_for(NAME)
ROUTERS = ("uniform", "skewed")
QUANTITIES = ("output", "dx", "dw1", "dw2", "drouter")
COST_MARGIN = 1.25
"""On GPUs the skewed router's step may cost at most this much more than its imbalance ratio predicts."""


@dataclass(frozen=True, kw_only=True)
class EpConfig:
    experts: int = 16
    """Experts in all; the launch's ranks must divide them."""
    top_k: int = 2
    """Experts per token."""
    capacity_factor: float = 1.25
    """Of the golden comparison: an expert accepts ⌈factor·T·k/E⌉ assignments per rank (0: no limit)."""
    skew: float = 3.0
    """The skewed router's logit bias, from +skew (expert 0) down to 0 (the last expert)."""
    golden_tokens: int = 256
    """Tokens per rank of the golden comparison (float32, against one process)."""
    golden_hidden: int = 256
    """Model width of the golden comparison."""
    golden_ffn: int = 512
    """Expert MLP width of the golden comparison."""
    tokens: int = 8192
    """Tokens per rank of the timings."""
    hidden: int = 2048
    """Model width of the timings."""
    ffn: int = 4096
    """Expert MLP width of the timings."""
    capacity_factors: tuple[float, ...] = (1.0, 1.25, 2.0, 0.0)
    """Timed capacity factors (0: no limit)."""
    reps: int = 10
    """Timed repetitions per case (after one warm-up)."""
    dtype: str = "bfloat16"
    """dtype of the timings (the golden comparison is float32)."""
    seed: int = 0
    """Seed of the weights and tokens (the same on every rank)."""

    def __post_init__(self) -> None:
        if not 1 <= self.top_k <= self.experts:
            raise ProfileError(f"ep.top_k = {self.top_k} must lie in [1, ep.experts = {self.experts}]")


CONFIG = ConfigSection(
    NAME,
    EpConfig,
    {
        "gloo-cpu": EpConfig(
            experts=8,
            golden_tokens=32,
            golden_hidden=16,
            golden_ffn=32,
            tokens=64,
            hidden=32,
            ffn=64,
            reps=1,
            dtype="float32",
        ),
        "nccl-gpu": EpConfig(),
    },
)


def tolerances(cfg: EpConfig, world: int) -> dict[str, Tolerance]:
    per_expert = max(1, world * cfg.golden_tokens * cfg.top_k // cfg.experts)
    scale = {
        "dw1": math.sqrt(per_expert),
        "dw2": math.sqrt(per_expert),
        "drouter": math.sqrt(world * cfg.golden_tokens),
    }
    return {
        q: moe_tolerance(cfg.golden_hidden, cfg.golden_ffn, per_expert, scale=scale.get(q, 1.0))
        for q in QUANTITIES
    }


def estimate(p) -> tuple[float, str]:
    """Per router: the dispatch timed, then a forward+backward per capacity factor, (reps + 1) times; an
    expert layer is 2 matmuls of 2·T·k·d·f FLOPs forward (×3 with backward), plus 4 all-to-alls of T·k·d
    elements."""
    cfg = p.profile.section(CONFIG)
    rows_bytes = cfg.tokens * cfg.top_k * cfg.hidden * DTYPE_BYTES.get(cfg.dtype, 4)
    a2a = p.collective_s("all_to_all", rows_bytes, p.parallel_ranks)
    step = 3 * 2 * 2 * cfg.tokens * cfg.top_k * cfg.hidden * cfg.ffn / (p.peak_flops * p.assume.mfu) + 4 * a2a
    seconds = p.assume.torchrun_launch_s + len(ROUTERS) * (cfg.reps + 1) * (
        a2a + len(cfg.capacity_factors) * step
    )
    return seconds, (
        f"EP = {p.parallel_ranks}, {cfg.tokens} tokens per card, {len(cfg.capacity_factors)} capacity "
        f"factors × "
        f"2 routers: expert matmuls at the assumed MFU plus 4 all-to-alls per step"
    )


def timed_tokens(profile: Profile, facts: dict) -> tuple[int, str]:
    """(tokens per rank of the timings that fit the card topology found, what they were sized to)."""
    cfg = profile.section(CONFIG)
    return ep_sized(
        cfg.tokens,
        card_bytes(facts),
        experts=cfg.experts,
        top_k=cfg.top_k,
        hidden=cfg.hidden,
        ffn=cfg.ffn,
        ranks=profile.parallel_ranks,
        dtype_bytes=DTYPE_BYTES.get(cfg.dtype, 4),
    )


def expect(profile: Profile, facts: Facts) -> list[Expectation]:
    cfg = profile.section(CONFIG)
    tols = tolerances(cfg, profile.parallel_ranks)
    out = subset_expectations(NAME, profile, "EP (experts per rank)")
    out += (
        []
        if card_bytes(facts) is None
        else [  # what the timings were sized to on this card
            Expectation(
                stage=NAME,
                case="sizing",
                metric="tokens",
                value=float(timed_tokens(profile, facts)[0]),
                unit="count",
                source="model",
                basis=timed_tokens(profile, facts)[1],
            )
        ]
    )
    out += [
        Expectation(
            stage=NAME,
            case=f"{router}.{q}",
            metric="max_abs_error",
            value=tols[q].bound,
            unit="abs",
            basis=f"at most {tols[q].describe()} (suite/costmodel/drill_tolerance.py)",
            algo=router,
            world=profile.parallel_ranks,
            dtype=CHECK_DTYPE,
        )
        for router in ROUTERS
        for q in QUANTITIES
    ]
    out += [
        Expectation(
            stage=NAME,
            case=router,
            metric="token_set_mismatches",
            value=0.0,
            unit="count",
            basis="the same routing rule on the same tokens: every expert gets exactly its tokens",
            algo=router,
            world=profile.parallel_ranks,
        )
        for router in ROUTERS
    ]
    return out


def run(profile: Profile, ctx: StageContext) -> list[Row]:
    cfg = profile.section(CONFIG)
    ranks = profile.parallel_ranks
    if cfg.experts % ranks:
        raise ProfileError(
            f"ep.experts = {cfg.experts} is not divisible by the {ranks} ranks: pick a multiple of {ranks}"
        )
    ctx.say(
        f"EP = {ranks}{subset_note(profile)}, {cfg.experts} experts, top-{cfg.top_k}: golden comparison, "
        f"then "
        f"timings (one launch)"
    )
    tokens, sized = timed_tokens(profile, ctx.facts)
    if tokens != cfg.tokens:
        ctx.say(f"ep timings sized: {sized}")
        cfg = dataclasses.replace(cfg, tokens=tokens)
    return ctx.torchrun(
        "suite.stages.ep.worker", ["--ep", json.dumps(dataclasses.asdict(cfg))], tag="ep", nproc=ranks
    ).rows()


def _value(rows: list[Row], case: str, metric: str) -> float | None:
    hit = [r.value for r in rows if r.case == case and r.metric == metric]
    return hit[0] if hit else None


def judge(rows: list[Row], expectations: list[Expectation], facts: Facts) -> list[Verdict]:
    profile = profile_of(facts)
    tols = tolerances(profile.section(CONFIG), profile.parallel_ranks)
    out = [golden_verdict(rows, router, tols) for router in ROUTERS]
    out.append(load_verdict(rows, profile.section(CONFIG)))
    out.append(cost_verdict(rows, facts))
    return out


def golden_verdict(rows: list[Row], router: str, tols: dict[str, Tolerance], prefix: str = "") -> Verdict:
    errors = {q: _value(rows, f"{prefix}{router}.{q}", "max_abs_error") for q in QUANTITIES}
    mismatches = _value(rows, f"{prefix}{router}", "token_set_mismatches")
    assignments = _value(rows, f"{prefix}{router}", "assignments")
    dropped, dropped_ref = (_value(rows, f"{prefix}{router}", m) for m in ("dropped", "dropped_reference"))
    missing = [q for q, v in errors.items() if v is None] + (["token sets"] if mismatches is None else [])
    bad = [q for q, v in errors.items() if v is not None and not (math.isfinite(v) and v <= tols[q].bound)]
    if mismatches:
        bad.append(f"{mismatches:.0f} tokens at the wrong expert")
    if not assignments:
        bad.append("no assignment compared")
    if dropped != dropped_ref:
        bad.append(f"{dropped} dropped where one process drops {dropped_ref}")
    shown = ", ".join(f"{q} {v:.2g}" for q, v in errors.items() if v is not None)
    observed = (
        f"{shown}; token-set mismatches {mismatches:.0f} over {assignments:.0f} assignments; dropped "
        f"{dropped:.0f} (one process: {dropped_ref:.0f})"
        if not missing
        else f"not compared: {', '.join(missing)}"
    )
    return V.check(
        f"golden.{router}",
        not missing and not bad,
        expected=(
            f"every expert receives exactly the single-process tokens; max |EP − one process| ≤ "
            f"{tols['output'].describe()} (weight gradients ×√n: ≤ {tols['dw1'].bound:.2g})"
        ),
        observed=observed,
        reason_ok=f"the {router} router's tokens reach the right experts and come back right, forward and "
        f"backward",
        reason_bad=(
            f"{router} router: "
            + ("; ".join(bad) if bad else "see raw/ep/ep.rank0.log")
            + " — split sizes not exchanged, the combine not using the reversed splits, or the "
            "router not the same on every rank"
        ),
    )


def load_verdict(rows: list[Row], cfg: EpConfig) -> Verdict:
    imbalance = {r: _value(rows, r, "imbalance") for r in ROUTERS}
    dropped = {r: (_value(rows, r, "dropped"), _value(rows, r, "assignments")) for r in ROUTERS}
    if None in imbalance.values():
        return V.fail(
            "load",
            expected="tokens per expert counted for both routers",
            observed="no load rows",
            reason="see raw/ep/ep.rank0.log",
        )
    observed = "; ".join(
        f"{r}: max/mean {imbalance[r]:.2f}, dropped {dropped[r][0]:.0f} of "
        f"{(dropped[r][0] or 0) + (dropped[r][1] or 0):.0f}"
        for r in ROUTERS
    )
    return V.check(
        "load",
        imbalance["skewed"] > imbalance["uniform"],
        expected=f"the skewed router (bias {cfg.skew:g}) more imbalanced than the uniform one",
        observed=observed,
        bad="warn",
        reason_ok=f"load recorded at capacity factor {cfg.capacity_factor:g}; the skew is real",
        reason_bad="the skewed router is not more imbalanced: raise ep.skew so the second case tests "
        "imbalance",
    )


def cost_verdict(rows: list[Row], facts: dict) -> Verdict:
    """The skewed router's step time over the uniform one's (no capacity limit) against the imbalance
    ratio."""
    t = {r.algo: r.value for r in rows if r.case == "step.cf_none" and r.metric == "time_s"}
    imbalance = {r: _value(rows, r, "imbalance") for r in ROUTERS}
    expected = f"skewed/uniform step time ≤ {COST_MARGIN}× the ratio of their imbalance factors"
    if not all(t.get(r) for r in ROUTERS) or None in imbalance.values():
        observed = "not measured (no step.cf_none rows)"
        return (
            V.cpu_skip("imbalance_cost", expected, observed)
            if not judges_performance(facts)
            else V.fail(
                "imbalance_cost", expected=expected, observed=observed, reason="see raw/ep/ep.rank0.log"
            )
        )
    ratio, share = t["skewed"] / t["uniform"], imbalance["skewed"] / imbalance["uniform"]
    observed = f"time ratio {ratio:.2f}, imbalance ratio {share:.2f}"
    if not judges_performance(facts):
        return V.cpu_skip("imbalance_cost", expected, observed)
    return V.check(
        "imbalance_cost",
        ratio <= COST_MARGIN * share,
        expected=expected,
        observed=observed,
        bad="warn",
        reason_ok="the busiest expert sets the pace, as its load predicts",
        reason_bad="the imbalance costs more than its share: the all-to-all's uneven splits or the busiest "
        "rank's memory traffic slow the whole step; try a capacity factor or a balancing loss",
    )


def headline(rows: list[Row], verdicts: list[Verdict], expectations: list[Expectation]) -> str | None:
    """Tokens per expert against one process, the worst gradient error as a share of its tolerance, each
    router's imbalance; on GPUs what the imbalance cost in step time."""
    from suite import headlines as hl

    mismatches = hl.matching(rows, "uniform", "token_set_mismatches") + hl.matching(
        rows, "skewed", "token_set_mismatches"
    )
    if not mismatches:
        return None
    assignments = sum(r.value for r in rows if r.metric == "assignments" and r.value == r.value)
    worst = hl.worst_ratio(rows, expectations, "max_abs_error")
    text = f"{sum(r.value for r in mismatches):.0f} token mismatches over {assignments:.0f} assignments" + (
        f", worst error {worst:.2g}× tolerance" if worst == worst else ""
    )
    imbalance = {router: hl.matching(rows, router, "imbalance") for router in ("uniform", "skewed")}
    if all(imbalance.values()):
        text += (
            f" · max/mean load {imbalance['uniform'][0].value:.2f} uniform, "
            f"{imbalance['skewed'][0].value:.2f} skewed"
        )
    cost = hl.verdict(verdicts, "ep.imbalance_cost")
    if cost and cost.status != "skip":
        text += f" · skew cost {cost.observed}"
    return text


STAGE = Stage(
    row=14,
    after=("bandwidth",),  # runs with the other drills, after the collectives are known to work
    title="MoE all-to-all dispatch/combine: bandwidth, step time vs capacity factor",
    measures="all-to-all bandwidth at the dispatch sizes, step time per capacity factor, the imbalance's "
    "cost",
    wrong="imbalance (max/mean tokens per expert) costing more than its share; any golden difference",
    rehearsal="EP = 4 on gloo: tokens per expert exactly, output and gradients vs one process, uniform and "
    "skewed",
    config=CONFIG,
    estimate=estimate,
    expect=expect,
    run=run,
    judge=judge,
    headline=headline,
)
