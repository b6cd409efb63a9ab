"""The stage's folder: this declaration; beside it what only this stage runs (figure.py: its figures).
Imported by suite.stages' discovery (runner, plan, ingest, reports); it imports no other stage.
Stage 3 — crossover: the message size where a tree all-reduce stops beating a ring.

    python -m suite run --stages crossover --profile nccl-gpu
    python -m suite run --stages crossover --profile gloo-cpu    # the hand ring and tree on gloo

Both faces run the hand-written ring and binomial-tree all-reduce (suite/stages/crossover/hand_allreduce.py)
over the profile's sizes in one launch: every result compared elementwise with dist.all_reduce,
every rank's bytes compared with the formulas, each algorithm timed. On a GPU box the all_reduce
sweep is also pinned to NCCL_ALGO=Ring and then Tree, through torch and nccl-tests, to find
NCCL's own crossover. Predicted: S* = αβ(L − (n−1)) / ((n−1)/n − L), L = ⌈log₂n⌉, from the α and
β the bandwidth stage fitted (suite/costmodel/alphabeta.py: crossover_bytes). The prediction is
judged against the hand ring and binomial tree, which are what it describes; NCCL's intra-node
Tree is a chain (NVIDIA/nccl#919), so NCCL's measured crossover is reported beside it as a fact.
"""

from __future__ import annotations

import math
import os

from suite import headlines as hl
from suite.config import Profile
from suite.context import StageContext
from suite.costmodel.alphabeta import (
    crossover_bytes,
    ring_allreduce_bytes,
    ring_allreduce_s,
    tree_allreduce_bytes,
    tree_allreduce_s,
)
from suite.facts import Facts, alpha_beta
from suite.launch.rows import launch_rows, launch_verdicts
from suite.results import Expectation, Row, Verdict
from suite.stage_contract import Stage
from suite.stages import _nccl_tests
from suite.stages._alphabeta_fit import fit_rows
from suite.verdicts import judges_performance, not_captured, verdicts_for

NAME = "crossover"

CONFIG = None  # the profile's `sweep`, shared with bandwidth


def estimate(p) -> tuple[float, str]:
    """`make plan`'s minutes for this stage (p: suite.plan.hours.PlanInputs)."""
    seconds = sum(p.assume.nccl_tests_launch_s + p.sweep_s("all_reduce", algo=algo) for algo in ALGOS)
    return seconds, "the all_reduce sweep twice: NCCL_ALGO=Ring, then Tree"


FAR = 10.0  # measured crossover more than 10× from the prediction warns
# The hand algorithms hold about four buffer copies (input, reference, result, tree scratch): 1 GiB caps
# them at a few GiB of device memory, and every predicted crossover lies orders of magnitude below it.
HAND_MAX_BYTES = 1 << 30
ALGOS = ("ring", "tree")
NCCL_ALGOS = ("Ring", "Tree")
BYTES_FORMULA = {"ring": ring_allreduce_bytes, "tree": tree_allreduce_bytes}


def expect(profile: Profile, facts: Facts) -> list[Expectation]:
    n = profile.nproc
    alpha, beta, basis = alpha_beta(facts, profile.device)
    out = []
    for size in profile.sweep.sizes():
        for algo, model in (("ring", ring_allreduce_s), ("tree", tree_allreduce_s)):
            out.append(
                Expectation(
                    stage=NAME,
                    case=algo,
                    metric="time_us",
                    value=model(size, n, alpha, beta) * 1e6,
                    unit="us",
                    basis=f"{algo} α-β; {basis}",
                    size_bytes=size,
                    world=n,
                    algo=algo,
                    source="model",
                )
            )
    cross = crossover_bytes(n, alpha, beta)
    out.append(
        Expectation(
            stage=NAME,
            case="crossover",
            metric="crossover_bytes",
            value=float("nan") if cross is None else cross,
            unit="bytes",
            world=n,
            source="model",
            basis=(
                f"S* = αβ(L−(n−1))/((n−1)/n−L), L=⌈log₂{n}⌉, α={alpha * 1e6:.3g} µs, "
                f"β={beta / 1e9:.3g} GB/s ({basis})"
                if cross
                else f"no crossover for n = {n}: the ring never loses"
            ),
        )
    )
    return out


def run(profile: Profile, ctx: StageContext) -> list[Row]:
    s = profile.sweep
    sizes = ",".join(str(x) for x in s.sizes())
    common = ["--warmup", str(s.warmup_iters), "--iters", str(s.iters), "--dtype", s.dtype, "--stage", NAME]
    hand_sizes = [x for x in s.sizes() if x <= HAND_MAX_BYTES]
    ctx.say(f"hand ring and tree all-reduce × {len(hand_sizes)} sizes")
    rows = launch_rows(
        ctx,
        "suite.stages.crossover.hand_allreduce",
        ["--sizes", ",".join(map(str, hand_sizes)), *common, "--library"],
        tag="hand",
    )
    ctx.keep(rows, tag="hand")  # in the run directory now: a kill later in the stage loses none of them
    # each tool runs whatever became of the others: a failure never hides their data
    if profile.device == "cuda":
        for algo in NCCL_ALGOS:
            ctx.say(f"torch all_reduce with NCCL_ALGO={algo}")
            env = {**os.environ, "NCCL_ALGO": algo}
            args = ["--sizes", sizes, *common, "--collectives", "all_reduce", "--algo", algo]
            swept = launch_rows(ctx, "suite.workloads.collective_sweep", args, tag=f"torch-{algo}", env=env)
            ctx.keep(swept, tag=f"torch-{algo}")
            rows += swept + _nccl_tests.sweep(
                profile, ctx, ["all_reduce"], algo=algo, env={"NCCL_ALGO": algo}, on_binary=ctx.keep
            )
    rows += analysis_rows(rows, profile.nproc)
    return rows


def times(rows: list[Row], source: str, algo: str) -> dict[int, float]:
    """size → time (µs) of one curve: hand rows by case, NCCL_ALGO rows by the algo column."""
    out = {}
    for r in rows:
        if r.metric != "time_us" or r.source != source or r.algo != algo or not math.isfinite(r.value):
            continue
        if source == "nccl-tests" and r.placement != "oop":
            continue
        out[r.size_bytes] = r.value
    return out


def measured_crossover(tree: dict[int, float], ring: dict[int, float]) -> tuple[float | None, str]:
    """The first size where the ring overtakes the tree (geometric mean of the sizes either side), and what
    happened."""
    sizes = sorted(set(tree) & set(ring))
    if not sizes:
        return None, "no common sizes"
    tree_wins = [tree[s] < ring[s] for s in sizes]
    for i in range(1, len(sizes)):
        if tree_wins[i - 1] and not tree_wins[i]:
            return math.sqrt(
                sizes[i - 1] * sizes[i]
            ), f"tree faster up to {sizes[i - 1]} B, ring from {sizes[i]} B"
    return None, (
        "tree faster at every size"
        if all(tree_wins)
        else "ring faster at every size"
        if not any(tree_wins)
        else "ring faster first, then tree"
    )


def fitted_crossover(rows: list[Row], source: str) -> float | None:
    """Where the fitted lines t = a + b·S of the ring and the tree cross."""
    fit = {(r.algo, r.metric): r.value for r in rows if r.source == source and r.case.startswith("fit.")}
    try:
        a_r, a_t = fit[("ring", "alpha")], fit[("tree", "alpha")]
        b_r, b_t = fit[("ring", "beta")], fit[("tree", "beta")]
    except KeyError:
        return None
    n = next((r.world for r in rows if r.source == source and r.world), None) or 2
    L = math.ceil(math.log2(n))
    # intercepts k·α (µs) and slopes c/β (µs per byte) of each line, as step_shape defines them
    ia, ib = 2 * (n - 1) * a_r, 2 * L * a_t
    sa, sb = 2 * (n - 1) / n / (b_r * 1e3), 2 * L / (b_t * 1e3)
    if sb == sa:
        return None
    size = (ia - ib) / (sb - sa)
    return size if size > 0 else None


PAIRS = (("hand", "tree", "ring"), ("torch", "Tree", "Ring"), ("nccl-tests", "Tree", "Ring"))


def analysis_rows(rows: list[Row], world: int) -> list[Row]:
    """Per-algorithm α-β fits and the measured and fitted crossover of each pair of curves present."""
    out: list[Row] = []
    for algo in ALGOS:  # hand rows: case = algo
        out += fit_rows(rows, world, stage=NAME, case=algo, algo=algo, match_algo=algo)
    for nccl_algo in NCCL_ALGOS:  # NCCL_ALGO rows: case all_reduce, algo Ring/Tree; fits labelled ring/tree
        out += fit_rows(
            rows, world, stage=NAME, case="all_reduce", algo=nccl_algo.lower(), match_algo=nccl_algo
        )
    for source, tree, ring in PAIRS:
        t, r = times(rows, source, tree), times(rows, source, ring)
        if not t or not r:
            continue
        size, what = measured_crossover(t, r)
        out.append(
            Row(
                stage=NAME,
                case="crossover",
                metric="crossover_bytes",
                unit="bytes",
                source=source,
                value=float("nan") if size is None else size,
                world=world,
                text=what,
            )
        )
        fitted = fitted_crossover(out, source)
        out.append(
            Row(
                stage=NAME,
                case="crossover",
                metric="crossover_bytes_fit",
                unit="bytes",
                source=source,
                value=float("nan") if fitted is None else fitted,
                world=world,
                text="where the fitted ring and tree lines cross",
            )
        )
    return out


# ---------------------------------------------------------------- judge

VERDICTS = verdicts_for(NAME)


def judge(rows: list[Row], expectations: list[Expectation], facts: Facts) -> list[Verdict]:
    # ingested captures hold nccl-tests' Ring and Tree runs, not the hand algorithms
    if not_captured(facts, "hand"):
        verdicts = [
            VERDICTS.live_only_skip(f"{check}.{algo}", "the hand-written ring and tree", "hand all-reduce")
            for check in ("correct", "bytes")
            for algo in ALGOS
        ]
    else:
        verdicts = [judge_correct(rows, algo) for algo in ALGOS] + [judge_bytes(rows, algo) for algo in ALGOS]
    verdicts += judge_nccl_runs(rows) + launch_verdicts(NAME, rows)
    predicted = next((e.value for e in expectations if e.metric == "crossover_bytes"), float("nan"))
    measured = {r.source: r for r in rows if r.metric == "crossover_bytes"}
    # The model describes the hand-written ring and binomial tree: they, not NCCL's, are held to it.
    hand = measured.get("hand")
    observed = (
        f"measured {hand.value:.3g} B (hand: {hand.text}); predicted {predicted:.3g} B"
        if hand
        else f"no hand ring/tree crossover rows; predicted {predicted:.3g} B"
    )
    if not judges_performance(facts):
        return verdicts + [
            VERDICTS.cpu_skip("crossover", f"within {FAR:g}× of the α-β prediction", observed),
            VERDICTS.cpu_skip("nccl", "NCCL's Ring/Tree crossover, measured", ""),
        ]
    return verdicts + [
        judge_crossover(hand, predicted, [r for r in rows if r.source == "hand"]),
        nccl_crossover(measured, predicted),
    ]


def judge_correct(rows: list[Row], algo: str) -> Verdict:
    wrong = [r for r in rows if r.source == "hand" and r.case == algo and r.metric == "wrong"]
    bad = [f"{r.size_bytes} B: {r.value:g}" for r in wrong if r.value != 0]
    return VERDICTS.check(
        f"correct.{algo}",
        bool(wrong) and not bad,
        expected="equal to dist.all_reduce elementwise at every size",
        observed="; ".join(bad[:6]) or (f"{len(wrong)} sizes, 0 wrong" if wrong else "no rows"),
        reason_ok=f"hand {algo} equals dist.all_reduce everywhere",
        reason_bad=(
            f"the hand {algo} differs from dist.all_reduce: see raw/crossover/hand.rank0.log"
            if bad
            else f"no {algo} results: the launch produced no rows"
        ),
    )


def judge_bytes(rows: list[Row], algo: str) -> Verdict:
    counted = [r for r in rows if r.source == "hand" and r.case == f"{algo}.bytes"]
    bad = []
    for r in counted:
        elem = r.size_bytes // r.count if r.count else 4
        sent, received = BYTES_FORMULA[algo](r.count or 0, r.world, elem, r.rank)
        want = sent if r.metric == "bytes_sent" else received
        if r.value != want:
            bad.append(f"rank {r.rank} {r.size_bytes} B {r.metric} {r.value:g} ≠ {want}")
    formula = "2(n−1)·S/n per rank" if algo == "ring" else "S × (children + parent) per rank, 2(n−1)·S in all"
    return VERDICTS.check(
        f"bytes.{algo}",
        bool(counted) and not bad,
        expected=formula,
        observed="; ".join(bad[:4]) or f"{len(counted)} counts match",
        reason_ok="every rank's bytes match",
        reason_bad=(
            f"the hand {algo} moves other bytes than its formula: a step sends the wrong chunk"
            if bad
            else "no byte counts recorded"
        ),
    )


def judge_nccl_runs(rows: list[Row]) -> list[Verdict]:
    """What became of all_reduce_perf under each NCCL_ALGO (GPU only: no status rows on CPU, no verdicts)."""
    out = []
    for r in rows:
        if r.metric == "status" and r.source == "nccl-tests":
            kind, _, text = (r.text or "").partition(": ")
            # cut: rows_from_output
            status = {"complete": "pass", "missing": "skip", "cut": "skip"}.get(kind, "fail")
            out.append(
                VERDICTS.verdict(
                    f"nccl_tests.{r.algo}",
                    status,
                    expected=f"all_reduce_perf with NCCL_ALGO={r.algo} runs to its footer",
                    observed=kind,
                    reason=text,
                )
            )
    return out


NCCL_TREE_NOTE = (
    "NCCL's intra-node Tree is a chain through the GPUs, not the binomial tree the α-β model "
    "describes (NVIDIA/nccl#919, #672): its crossover is reported beside the model's, not held to it"
)


def nccl_crossover(measured: dict[str, Row], predicted: float) -> Verdict:
    """NCCL's own Ring/Tree crossover (NCCL_ALGO pinned), as a measured fact beside the model's prediction."""
    source = next((s for s in ("nccl-tests", "torch") if s in measured), None)
    expected = f"NCCL's Ring/Tree crossover, measured (the binomial model predicts {predicted:.3g} B)"
    if source is None:
        return VERDICTS.skip(
            "nccl",
            expected=expected,
            observed="no NCCL_ALGO=Ring/Tree curves",
            reason="the NCCL_ALGO-pinned all_reduce runs produced no times: see the nccl_tests verdicts",
        )
    row = measured[source]
    where = f"{row.value:.3g} B" if math.isfinite(row.value) else "no crossing"
    return VERDICTS.passed(
        "nccl", expected=expected, observed=f"{where} ({source}: {row.text})", reason=NCCL_TREE_NOTE
    )


def judge_crossover(measured: Row | None, predicted: float, rows: list[Row]) -> Verdict:
    if not math.isfinite(predicted):
        return VERDICTS.skip(
            "crossover",
            expected="a predicted crossover",
            observed="none predicted",
            reason="the model predicts no crossover for this world size (n ≤ 2)",
        )
    sizes = sorted({r.size_bytes for r in rows if r.metric == "time_us" and r.size_bytes})
    if measured is None or not math.isfinite(measured.value):
        inside = bool(sizes) and sizes[0] <= predicted <= sizes[-1]
        what = measured.text if measured is not None else "no ring/tree curves"
        return VERDICTS.check(
            "crossover",
            not inside,
            bad="warn",
            expected=f"crossover near {predicted:.3g} B",
            observed=what,
            reason_ok="the predicted crossover lies outside the sweep, and none was measured inside it",
            reason_bad="the model puts a crossover inside the sweep but none was measured: α or β is off, "
            "or NCCL_ALGO was not honoured",
        )
    ratio = max(measured.value / predicted, predicted / measured.value)
    return VERDICTS.check(
        "crossover",
        ratio <= FAR,
        bad="warn",
        expected=f"within {FAR:g}× of {predicted:.3g} B",
        observed=f"{measured.value:.3g} B ({measured.source}), {ratio:.1f}× away",
        reason_ok="the α-β model places the crossover",
        reason_bad="the crossover is far from the model: the fitted α/β do not describe this algorithm "
        "(NVLS/CollNet in play, or a latency-bound protocol) — compare the per-algorithm fits",
    )


def headline(rows: list[Row], verdicts: list[Verdict], expectations: list[Expectation]) -> str | None:
    """Where Tree stops beating Ring, measured against the α-β prediction."""
    measured = hl.matching(rows, "crossover", "crossover_bytes")
    predicted = hl.matching(expectations, "crossover", "crossover_bytes")
    if not measured:
        return None
    return f"Ring/Tree crossover at {hl.size(measured[0].value)}" + (
        f" · α-β predicts {hl.size(predicted[0].value)}" if predicted else ""
    )


STAGE = Stage(
    row=3,
    after=("bandwidth",),  # α and β fitted by the bandwidth stage
    title="all_reduce pinned to `NCCL_ALGO=Ring` then `Tree`",
    measures="all-reduce time of a ring and a tree over message sizes, and the size where they cross",
    wrong="the hand ring/tree crossover more than 10× away from the α-β model's prediction (α, β fitted by "
    "the "
    "bandwidth stage); NCCL's own Ring/Tree crossover is reported, not judged (its intra-node Tree is a "
    "chain)",
    rehearsal="hand-written ring and tree all-reduce over isend/irecv, byte-counted, checked against "
    "dist.all_reduce",
    config=CONFIG,
    estimate=estimate,
    expect=expect,
    run=run,
    judge=judge,
    headline=headline,
)
