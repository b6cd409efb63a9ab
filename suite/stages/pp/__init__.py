"""The stage's folder: this declaration; beside it what only this stage runs (figure.py: its figures).
Imported by suite.stages' discovery (runner, plan, ingest, reports); it imports no other stage.
Stage pp (CHECKLIST "beyond the ten rows"): pipeline parallelism — golden check and the bubble, measured.

    python -m suite run --stages pp --profile gloo-cpu    # 2 ranks: golden, sleep-stage bubble at M = 1/2/3
    python -m suite run --stages pp --profile nccl-gpu    # PP = 2/4/8: golden, bubble at M = 1…16, GPT timed

One launch (suite/stages/pp/worker.py) serves every case:
  * golden: the GPT cut into stages under each of torch's schedules (GPipe, 1F1B, Interleaved1F1B and
    the zero-bubble ones) against one process: the loss and every gradient after one step, the
    parameters after a few AdamW steps, elementwise, within suite/costmodel/tolerance.py's bound.
  * bubble: sleep stages (forward 40 ms, backward 80 ms) under a hand-written 1F1B over isend/irecv and
    torch's schedules; each rank's idle share of a barrier-bounded step against (P−1)/(M+P−1), or
    (P−1)/(vM+P−1) interleaved (suite/costmodel/bubble.py). A real measurement on CPUs too: the
    sleeps make the work, scheduling makes the bubble. Judged is the idle share replayed from every
    rank's slots on one clock (suite/stages/pp/timeline.py: which slot waited for which, counted in
    slots), which a loaded machine does not move; the wall-clock share is shown beside it.
  * gpt: the profile's GPT (more layers on GPUs, so PP=8 with v=2 has a unit per stage) per schedule
    and PP degree: step time, each rank's bubble (CUDA events) and activation memory per stage.
PP on one GPU is impossible with NCCL (two ranks on one device are refused): the stage needs ≥ 2 cards.

Cost of the rehearsal (2 ranks, measured on the shared 2-core machine at load ≈ 3): ≈ 22 s — the launch and
the group ≈ 10 s, the golden check of five schedules with the mistakes ≈ 3 s, the sleep drill ≈ 6 s
(9 points of M + P − 1 slots of 120 ms; bubble_repeats = 3 measured steps a point triple the measured part),
the GPT timing ≈ 1 s.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from suite.config import ConfigSection, GptConfig, Profile, ProfileError
from suite.context import StageContext
from suite.costmodel.bubble import (
    HAND_SCHEDULES,
    TORCH_SCHEDULES,
    bubble_fraction,
    ideal_step_s,
    runs_at,
    schedule_chunks,
)
from suite.costmodel.sizing import parameter_count
from suite.costmodel.tolerance import CHECK_DTYPE, Tolerance, golden_tolerance
from suite.facts import Facts
from suite.facts import profile as profile_of
from suite.hardware.card_fit import card_bytes
from suite.hardware.stage_fit import pp_sized
from suite.results import Expectation, Row, Verdict
from suite.stage_contract import Stage
from suite.stages._parallel_ranks import subset_expectations, subset_note
from suite.verdicts import judges_performance, verdicts_for

NAME = "pp"
V = verdicts_for(NAME)


@dataclass(frozen=True, kw_only=True)
class PpConfig:
    ranks: int = 0
    """Processes of the launch; 0 means nproc. The rehearsal uses 2: the bubble is a P = 2 drill there."""
    degrees: tuple[int, ...] = (2, 4, 8)
    """PP degrees of the golden check and the GPT timing (ranks 0..d−1 form the pipeline)."""
    schedules: tuple[str, ...] = ("gpipe", "1f1b", "interleaved_1f1b", "interleaved_zb", "zbv")
    """torch schedules of the golden check (suite/stages/pp/split.py names them)."""
    chunks: int = 2
    """v, stages per rank of the looped schedules (interleaved_1f1b, interleaved_zb)."""
    golden_microbatches: int = 4
    """M of the golden check: divides the model's batch; ≥ every degree (torch's 1F1B needs M ≥ P)."""
    golden_steps: int = 3
    """AdamW steps before the parameters are compared."""
    bubble_schedules: tuple[str, ...] = ("hand_1f1b", "gpipe", "1f1b", "interleaved_1f1b")
    """Schedules of the sleep-stage drill; hand_1f1b is the hand-written one over isend/irecv."""
    bubble_microbatches: tuple[int, ...] = tuple(range(1, 17))
    """M of the drill: 1…16 on GPUs; the rehearsal takes 1, 2, 3 (M ≥ P for the 1F1B family: two points each,
    the interleaved one included), which keeps its drill near 4 s (a step of M + P − 1 slots of 120 ms
    each)."""
    bubble_repeats: int = 3
    """Measured steps per point of the drill; the least idle one is kept (suite/stages/pp/worker.py's
    sleep_stage_idle: load can only add to a step's replay, and seldom to three in a row)."""
    bubble_ranks: int = 0
    """P of the drill; 0 means every rank of the launch."""
    forward_ms: float = 40.0
    """Sleep of a stage's forward, ms; ≥ 40 so per-op overhead (1–4 ms, FACTS.md) stays small."""
    backward_ms: float = 80.0
    """Sleep of its backward, ms (1:2). Each interleaved chunk sleeps the same: the formula holds for
    any chunk length, and halving it would double the overhead's share."""
    bubble_tolerance: float = 0.05
    """The GPT's bubble: the margin above gpt_bubble_factor × formula (GPUs)."""
    schedule_tolerance: float = 0.005
    """Largest accepted |replayed − formula| of the sleep drill's idle share (the mean over its ranks) at
    every M. The replay (suite/stages/pp/timeline.py) counts slots, not seconds: a correct schedule gives the
    formula to float rounding whatever the load, one slot waited for out of order moves it ≥ 0.01 (P = 8, M =
    16)."""
    timed_schedules: tuple[str, ...] = ("gpipe", "1f1b", "interleaved_1f1b")
    """Schedules of the GPT timing."""
    timed_microbatches: tuple[int, ...] = (8, 16)
    """M of the GPT timing (below P the 1F1B family is skipped)."""
    micro_batch: int = 1
    """Sequences per micro-batch of the GPT timing."""
    layers: int = 0
    """Decoder blocks of the pipelined GPT; 0 means the profile model's."""
    gpt_bubble_factor: float = 2.0
    """On GPUs the GPT's bubble warns above factor × formula + bubble_tolerance (its stages are unequal:
    the first holds the embedding, the last the head)."""

    def __post_init__(self) -> None:
        known = (*TORCH_SCHEDULES, *HAND_SCHEDULES)
        unknown = [
            s for s in (*self.schedules, *self.bubble_schedules, *self.timed_schedules) if s not in known
        ]
        if unknown or any(s in HAND_SCHEDULES for s in (*self.schedules, *self.timed_schedules)):
            raise ProfileError(
                f"pp schedules {unknown or list(HAND_SCHEDULES)} not usable there: choose from "
                f"{', '.join(TORCH_SCHEDULES)} (and hand_1f1b in bubble_schedules)"
            )
        if (
            min(self.degrees, default=0) < 2
            or self.chunks < 1
            or self.micro_batch < 1
            or self.bubble_repeats < 1
        ):
            raise ProfileError(
                f"pp degrees {self.degrees} must be ≥ 2, chunks {self.chunks}, micro_batch "
                f"{self.micro_batch} and bubble_repeats {self.bubble_repeats} ≥ 1: change them in "
                f"the pp section"
            )
        if not (
            self.forward_ms > 0
            and self.backward_ms > 0
            and self.bubble_tolerance > 0
            and self.schedule_tolerance > 0
        ):
            raise ProfileError(
                "pp forward_ms, backward_ms, bubble_tolerance and schedule_tolerance must be positive"
            )


CONFIG = ConfigSection(
    "pp",
    PpConfig,
    {
        "gloo-cpu": PpConfig(
            ranks=2,
            degrees=(2,),
            bubble_microbatches=(1, 2, 3),
            timed_schedules=("1f1b",),
            timed_microbatches=(4,),
        ),
        "nccl-gpu": PpConfig(golden_microbatches=8, layers=16),
    },
)


def pp_model(profile: Profile, facts: dict | None = None) -> GptConfig:
    """The pipelined GPT: the profile's model with the pp section's layers, sized to the card topology found
    (suite/hardware/stage_fit.py: hidden size, then sequence, halved until the heaviest rank fits)."""
    return pp_sizing(profile, facts)[0]


def pp_sizing(profile: Profile, facts: dict | None) -> tuple[GptConfig, str]:
    """(the pipelined GPT on this card, what it was sized to)."""
    cfg = dataclasses.replace(profile.model, layers=profile.section(CONFIG).layers or profile.model.layers)
    smallest = min(pp_degrees(profile), default=2)  # its stages are the largest share
    return pp_sized(
        cfg,
        card_bytes(facts or {}),
        smallest,
        profile.section(CONFIG).timed_microbatches,
        profile.section(CONFIG).micro_batch,
    )


def launch_ranks(profile: Profile) -> int:
    """Processes of the launch: the pp section's ranks, else the parallel ranks (the largest power of two ≤
    nproc, suite/power_of_two.py; 1 means the stage cannot run)."""
    return profile.section(CONFIG).ranks or profile.parallel_ranks


def pp_degrees(profile: Profile) -> tuple[int, ...]:
    """The configured PP degrees that fit the launch (PP=8 needs 8 cards)."""
    return tuple(d for d in profile.section(CONFIG).degrees if 2 <= d <= launch_ranks(profile))


def bubble_ranks(profile: Profile) -> int:
    return min(profile.section(CONFIG).bubble_ranks or launch_ranks(profile), launch_ranks(profile))


def check_launch(profile: Profile) -> None:
    pp, degrees = profile.section(CONFIG), pp_degrees(profile)
    if not degrees:
        raise ProfileError(f"no PP degree of {pp.degrees} fits {launch_ranks(profile)} ranks: raise nproc")
    refused = [
        f"{s} at PP={d}" for d in degrees for s in pp.schedules if not runs_at(s, d, pp.golden_microbatches)
    ]
    if refused or profile.model.batch % pp.golden_microbatches:
        raise ProfileError(
            f"golden_microbatches {pp.golden_microbatches} must divide the batch {profile.model.batch} "
            f"and suit every schedule (torch refuses {', '.join(refused) or 'none'}): change it "
            f"in the pp section"
        )


ONE_RANK = (
    "a pipeline needs ≥ 2 ranks, and NCCL refuses two ranks on one GPU (ncclInvalidUsage, "
    "'Duplicate GPU detected'): run pp with --nproc ≥ 2 on a box with ≥ 2 cards"
)


def worker_args(profile: Profile, mistakes: tuple[str, ...] = (), facts: dict | None = None) -> list[str]:
    """The command line of suite.stages.pp.worker for this profile and card (tests add the deliberate
    mistakes)."""
    from suite.workloads.worker_cli import model_args

    pp = profile.section(CONFIG)
    join = lambda xs: ",".join(map(str, xs))  # noqa: E731
    return [
        *model_args(pp_model(profile, facts)),
        "--degrees",
        join(pp_degrees(profile)),
        "--schedules",
        join(pp.schedules),
        "--chunks",
        str(pp.chunks),
        "--golden-microbatches",
        str(pp.golden_microbatches),
        "--golden-steps",
        str(pp.golden_steps),
        "--bubble-schedules",
        join(pp.bubble_schedules),
        "--bubble-microbatches",
        join(pp.bubble_microbatches),
        "--bubble-ranks",
        str(bubble_ranks(profile)),
        "--forward-ms",
        str(pp.forward_ms),
        "--backward-ms",
        str(pp.backward_ms),
        "--bubble-repeats",
        str(pp.bubble_repeats),
        "--timed-schedules",
        join(pp.timed_schedules),
        "--timed-microbatches",
        join(pp.timed_microbatches),
        "--micro-batch",
        str(pp.micro_batch),
        "--mistakes",
        join(mistakes),
    ]


def estimate(p) -> tuple[float, str]:
    """`make plan`'s seconds: the sleep drill's ideal steps (plus a warm-up each), and the GPT's timed steps
    (one card's step scaled by the micro-batches, the layers and ÷ P, stretched by the bubble)."""
    pp, prof = p.profile.section(CONFIG), p.profile
    ranks = min(bubble_ranks(prof), p.gpus)
    f, b = pp.forward_ms / 1e3, pp.backward_ms / 1e3
    drill = sum(
        pp.bubble_repeats * ideal_step_s(ranks, m, f, b, schedule_chunks(s, pp.chunks)) + 0.1
        for s in pp.bubble_schedules
        for m in pp.bubble_microbatches
        if runs_at(s, ranks, m)
    )
    layer_ratio = (pp.layers or prof.model.layers) / prof.model.layers
    degrees = [d for d in pp.degrees if 2 <= d <= min(p.gpus, launch_ranks(prof))]
    timed = 0.0
    for d in degrees:
        for s in pp.timed_schedules:
            for m in pp.timed_microbatches:
                if runs_at(s, d, m):
                    work = p.step_s * m * pp.micro_batch / prof.model.batch * layer_ratio / d
                    timed += p.steps * work / (1 - bubble_fraction(d, m, schedule_chunks(s, pp.chunks)))
    golden = len(degrees) * len(pp.schedules) * (pp.golden_steps + 1) * p.step_s * layer_ratio * 4  # float32
    return (
        p.assume.torchrun_launch_s + drill + timed + golden,
        f"sleep drill {drill:.0f} s at P = {ranks}; GPT at PP = {'/'.join(map(str, degrees))}, "
        f"{'/'.join(pp.timed_schedules)}",
    )


GOLDEN_CASES = ("loss", "grads", "params_after_training")


def case_tolerances(cfg: GptConfig, steps: int) -> dict[str, Tolerance]:
    """The loss and gradients after one forward and backward (loss scaled by ln V); parameters after
    `steps`."""
    one_pass = golden_tolerance(cfg, 0)
    return {
        "loss": dataclasses.replace(one_pass, scale=math.log(cfg.vocab)),
        "grads": one_pass,
        "params_after_training": golden_tolerance(cfg, steps),
    }


def expect(profile: Profile, facts: Facts) -> list[Expectation]:
    pp, degrees = profile.section(CONFIG), pp_degrees(profile)
    if launch_ranks(profile) < 2:
        return []
    cfg, sized = pp_sizing(profile, facts)
    out = [] if profile.section(CONFIG).ranks else subset_expectations(NAME, profile, "PP (layers per stage)")
    out += (
        []
        if card_bytes(facts) is None
        else [  # what the model was sized to on this card
            Expectation(
                stage=NAME,
                case="sizing",
                metric="parameters",
                value=float(parameter_count(cfg)),
                unit="count",
                source="model",
                basis=sized,
            )
        ]
    )
    out += [
        Expectation(
            stage=NAME,
            case=case,
            metric="max_abs_error",
            value=tol.bound,
            unit="abs",
            world=d,
            algo=s,
            count=pp.golden_microbatches,
            dtype=CHECK_DTYPE,
            basis=f"at most {tol.describe()} (suite/costmodel/tolerance.py)",
        )
        for d in degrees
        for s in pp.schedules
        for case, tol in case_tolerances(cfg, pp.golden_steps).items()
    ]
    p = bubble_ranks(profile)
    out += [
        _bubble_expectation("sleep_stages", s, p, m, pp.chunks)
        for s in pp.bubble_schedules
        for m in pp.bubble_microbatches
        if runs_at(s, p, m)
    ]
    out += [
        _bubble_expectation("gpt", s, d, m, pp.chunks)
        for d in degrees
        for s in pp.timed_schedules
        for m in pp.timed_microbatches
        if runs_at(s, d, m)
    ]
    return out


def _bubble_expectation(case: str, schedule: str, p: int, m: int, chunks: int) -> Expectation:
    v = schedule_chunks(schedule, chunks)
    basis = f"(P−1)/(vM+P−1) with v = {v}" if v > 1 else "(P−1)/(M+P−1)"
    return Expectation(
        stage=NAME,
        case=case,
        metric="bubble",
        value=bubble_fraction(p, m, v),
        unit="ratio",
        world=p,
        algo=schedule,
        count=m,
        source="model",
        basis=f"{basis}, P = {p}, M = {m}",
    )


def run(profile: Profile, ctx: StageContext) -> list[Row]:
    ranks = launch_ranks(profile)
    if ranks < 2:
        ctx.say(ONE_RANK)
        return []
    check_launch(profile)
    ctx.say(
        f"pipeline: golden per schedule, sleep-stage bubble, GPT timed (one launch of {ranks} ranks"
        f"{'' if profile.section(CONFIG).ranks else subset_note(profile)})"
    )
    if card_bytes(ctx.facts) is not None:
        ctx.say(f"pp model sized: {pp_sizing(profile, ctx.facts)[1]}")
    return ctx.torchrun(
        "suite.stages.pp.worker", worker_args(profile, facts=ctx.facts), tag="pp", nproc=ranks
    ).rows()


def judge(rows: list[Row], expectations: list[Expectation], facts: Facts) -> list[Verdict]:
    prof = profile_of(facts)
    pp, degrees = prof.section(CONFIG), pp_degrees(prof)
    if launch_ranks(prof) < 2:
        return [V.skip("run", expected="≥ 2 ranks", observed=f"{launch_ranks(prof)} rank", reason=ONE_RANK)]
    tols = case_tolerances(pp_model(prof, facts), pp.golden_steps)
    out = [golden_verdict(rows, tols, d, s) for d in degrees for s in pp.schedules]
    want = [e for e in expectations if e.metric == "bubble"]
    for schedule in pp.bubble_schedules:
        out.append(
            bubble_verdict(
                rows,
                [e for e in want if e.case == "sleep_stages" and e.algo == schedule],
                schedule,
                pp.schedule_tolerance,
            )
        )
    for d in degrees:
        for schedule in pp.timed_schedules:
            out.append(
                gpt_bubble_verdict(
                    rows,
                    [e for e in want if e.case == "gpt" and e.algo == schedule and e.world == d],
                    schedule,
                    d,
                    pp,
                    facts,
                )
            )
    return out


def golden_verdict(rows: list[Row], tols: dict[str, Tolerance], degree: int, schedule: str) -> Verdict:
    errors = {
        r.case: r.value
        for r in rows
        if r.metric == "max_abs_error" and r.world == degree and r.algo == schedule and r.case in GOLDEN_CASES
    }
    missing = [c for c in GOLDEN_CASES if c not in errors]
    bad = {c: v for c, v in errors.items() if not (math.isfinite(v) and v <= tols[c].bound)}
    observed = ", ".join(f"{c} {v:.2g}" for c, v in errors.items()) or "no comparison rows"
    if missing:
        reason_bad = f"no comparison for {', '.join(missing)}: see raw/pp/pp.rank0.log"
    else:
        reason_bad = (
            f"{schedule} at PP={degree} trains something else than one process ({', '.join(bad)}): a stage "
            f"boundary dropping a layer (a parameter no stage holds), gradients not scaled by 1/M, "
            f"micro-batches of inputs and targets in different orders"
        )
    return V.check(
        f"golden.{schedule}.pp{degree}",
        not missing and not bad,
        expected=(
            f"max |pipeline − one process| ≤ {tols['grads'].bound:.2g} (loss {tols['loss'].bound:.2g}, "
            f"parameters after training {tols['params_after_training'].describe()})"
        ),
        observed=observed,
        reason_ok=f"{schedule} computes what one process computes",
        reason_bad=reason_bad,
    )


def _measured(
    rows: list[Row], case: str, schedule: str, world: int, metric: str = "bubble"
) -> dict[int, list[float]]:
    out: dict[int, list[float]] = {}
    for r in rows:
        if r.case == case and r.metric == metric and r.algo == schedule and r.world == world:
            out.setdefault(r.count, []).append(r.value)
    return out


def bubble_verdict(rows: list[Row], want: list[Expectation], schedule: str, tolerance: float) -> Verdict:
    """Every M's idle share of the pipeline replayed from its slots (the mean over its ranks: idle rank-slots
    ÷ P·step) within `tolerance` of the formula. The replay counts which slot waited for which, not seconds,
    so the machine's load does not move it; the wall-clock idle share (`wall_bubble` rows) is shown beside
    it."""
    expected = (
        f"|mean idle share over the P ranks, replayed from the slots − formula| ≤ {tolerance:g} at every M"
    )
    if not want:
        return V.skip(
            f"bubble.{schedule}",
            expected=expected,
            observed="no M to measure",
            reason=f"{schedule} runs at no configured M (the 1F1B family needs M ≥ P)",
        )
    got = _measured(rows, "sleep_stages", schedule, want[0].world)
    wall = _measured(rows, "sleep_stages", schedule, want[0].world, "wall_bubble")
    mean = {m: sum(v) / len(v) for m, v in got.items() if len(v) == want[0].world}
    off = {e.count: abs(mean[e.count] - e.value) if e.count in mean else math.inf for e in want}
    observed = ", ".join(
        f"M={e.count}: {mean[e.count]:.3f} vs {e.value:.3f}"
        + (f" (wall {sum(wall[e.count]) / len(wall[e.count]):.3f})" if wall.get(e.count) else "")
        if e.count in mean
        else f"M={e.count}: {len(got.get(e.count, []))} of {e.world} ranks"
        for e in want
    )
    worst = max(off, key=off.get)
    return V.check(
        f"bubble.{schedule}",
        all(v <= tolerance for v in off.values()),
        expected=expected,
        observed=observed,
        reason_ok=f"{schedule}'s bubble follows {want[0].basis.split(',')[0]}",
        reason_bad=(
            f"{schedule} at M={worst} is {off[worst]:.3f} off the formula (inf: ranks missing): "
            f"a slot waited for one the schedule does not order before it (an extra barrier, a "
            f"stage waiting on a send), or a hand-off late by a whole slot (see raw/pp/pp.rank*.log)"
        ),
    )


def gpt_bubble_verdict(
    rows: list[Row], want: list[Expectation], schedule: str, degree: int, pp: PpConfig, facts: dict
) -> Verdict:
    check, got = f"gpt_bubble.{schedule}.pp{degree}", _measured(rows, "gpt", schedule, degree)
    expected = f"bubble ≤ {pp.gpt_bubble_factor:g} × formula + {pp.bubble_tolerance:g}"
    observed = ", ".join(f"M={m}: {max(v):.3f}" for m, v in sorted(got.items())) or "no rows"
    if not judges_performance(facts):
        return V.cpu_skip(check, expected, observed)
    if not want:
        return V.skip(
            check, expected=expected, observed=observed, reason=f"{schedule} runs at no configured M"
        )
    limit = {e.count: pp.gpt_bubble_factor * e.value + pp.bubble_tolerance for e in want}
    over = {m: max(got[m]) for m in limit if m in got and max(got[m]) > limit[m]}
    missing = [m for m in limit if m not in got]
    return V.check(
        check,
        not over and not missing,
        expected=expected,
        observed=observed,
        reason_ok=f"{schedule} at PP={degree} idles about as its ramp says",
        bad="warn",
        reason_bad=(
            f"missing M {missing}"
            if missing
            else f"bubble far above the formula at M {sorted(over)}: unequal stages (the head's stage "
            f"is heaviest), slow p2p between the pipeline's cards (see topology), host launch "
            f"overhead"
        ),
    )


def headline(rows: list[Row], verdicts: list[Verdict], expectations: list[Expectation]) -> str | None:
    """The measured bubble against (P−1)/(M+P−1): the GPT's where it was judged (GPUs), else the sleep stages'
    (the schedule's own arithmetic); and how many schedules computed what one process computes."""
    from suite import headlines as hl

    case = "gpt" if hl.judged(verdicts, "pp.gpt_bubble.") else "sleep_stages"
    points: dict[tuple, list[float]] = {}
    for r in hl.matching(rows, case, "bubble"):
        points.setdefault((r.algo, r.world, r.count), []).append(r.value)
    golden = hl.passed(verdicts, "pp.golden.")
    tail = f" · {golden} schedules equal one process" if golden else ""
    if not points:
        return tail[3:] or None
    prefer = [k for k in points if k[0] == "1f1b"] or list(points)
    algo, world, count = max(prefer, key=lambda k: (k[1] or 0, k[2] or 0))
    formula = hl.matching(expectations, case, "bubble", algo=algo, world=world, count=count)
    against = f" vs formula {formula[0].value:.3f}" if formula else ""
    where = "GPT" if case == "gpt" else "sleep stages"
    return (
        f"{where} {algo} P={world} M={count}: bubble "
        f"{hl.median(points[(algo, world, count)]):.3f}{against}{tail}"
    )


STAGE = Stage(
    row=12,
    after=("zero",),  # reads no facts; the checklist runs the pipeline after the other scaling experiments
    title="GPT at PP = 2/4/8: step time, measured bubble per schedule",
    measures="pipeline step time and bubble per schedule at PP = 2/4/8, activation memory per stage",
    wrong="bubble far above (P−1)/(M+P−1); a schedule computing other gradients than one process",
    rehearsal="golden check of every schedule vs one process; sleep-stage bubble vs the formula on 2 gloo "
    "ranks",
    config=CONFIG,
    estimate=estimate,
    expect=expect,
    run=run,
    judge=judge,
    headline=headline,
)
