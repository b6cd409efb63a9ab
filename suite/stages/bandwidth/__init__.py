"""The stage's folder: this declaration; beside it what only this stage runs (figure.py: its figures).
Imported by suite.stages' discovery (runner, plan, ingest, reports); it imports no other stage.
Stage 2 — bandwidth: bus bandwidth of every collective over message sizes, torch and nccl-tests.

    python -m suite run --stages bandwidth --profile nccl-gpu    # on the rented box
    python -m suite run --stages bandwidth --profile gloo-cpu    # the rehearsal: the torch sweep on gloo

One torchrun launch first tries every collective and point-to-point primitive once (the probe,
suite/workloads/probe.py: supported or not, right or wrong; judged in suite/stages/_probe.py), then sweeps
all_reduce, all_gather, reduce_scatter, all_to_all, broadcast and send/recv over the profile's sizes
(suite/workloads/collective_sweep.py: nccl-tests' columns, every result checked elementwise). On a GPU box
each nccl-tests `*_perf` binary then runs once (suite/stages/_nccl_tests.py), its output kept untouched in
raw/bandwidth/. α and β are fitted by least squares from the all_reduce rows and published as
facts["alpha_beta"] for later stages. Across nodes that sweep spans every node (the inter-node measurement,
held to the NICs), followed by the node-pair matrix (suite/stages/bandwidth/node_pairs.py) and every node's
own intra-node sweep at once (suite/stages/bandwidth/intra_node.py: held to the link peak, fitted as
facts["alpha_beta_intra"]).
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

from suite import headlines as hl
from suite.config import Profile
from suite.context import StageContext
from suite.costmodel.alphabeta import collective_time_s
from suite.costmodel.size_budget import size_text
from suite.facts import Facts, alpha_beta, ingested, link_peak_or_why, profile_or_none
from suite.hardware.card_fit import card_bytes, nccl_tests_max_bytes
from suite.hardware.gpu_sampler import period_for, sampling, throttle_verdicts
from suite.launch.rows import launch_rows, launch_verdicts
from suite.results import Expectation, Row, Verdict
from suite.stage_contract import Stage
from suite.stages import _nccl_tests
from suite.stages._alphabeta_fit import fit_and_pick
from suite.stages._probe import probe_verdicts

# the link floors (70% NVLink, 40% PCIe), one node or many
from suite.stages.bandwidth import (
    intra_judges as _intra_judges,
)
from suite.stages.bandwidth import nodes as bandwidth_nodes
from suite.verdicts import judges_performance, not_captured, verdicts_for

NAME = "bandwidth"

CONFIG = None  # the sweep sizes are the profile's `sweep`, shared with crossover


def estimate(p) -> tuple[float, str]:
    """`make plan`'s minutes for this stage (p: suite.plan.hours.PlanInputs): every nccl-tests binary, then
    the torch sweep."""
    nccl = sum(p.assume.nccl_tests_launch_s + p.sweep_s(c) for c in COLLECTIVES)
    torch_sweep = p.assume.torchrun_launch_s + sum(p.sweep_s(c, placements=1) for c in COLLECTIVES)
    # across nodes: the pair matrix and every node's own sweep
    nodes_s, nodes_words = bandwidth_nodes.estimate(p)
    return nccl + torch_sweep + nodes_s, (
        f"{len(COLLECTIVES)} nccl-tests × {len(p.sizes)} sizes {p.sizes[0]} B–{p.sizes[-1] / 2**30:g} GiB × "
        f"{p.repeats} iterations × 2 placements, plus the torch sweep"
        + "".join(f", plus {w}" for w in nodes_words)
    )


# all_reduce, all_gather, reduce_scatter, all_to_all, broadcast, sendrecv
COLLECTIVES = tuple(_nccl_tests.PROGRAMS)
PEAK_SHARE = _intra_judges.PEAK_SHARE  # large-message busbw must reach 70% of the link's per-direction peak
DIP = 0.25  # busbw falling by more than 25% from one large size to the next warns
TORCH_LOSS = 0.15  # torch more than 15% below nccl-tests at the largest size warns
LARGE_BYTES = 1 << 20  # "large" sizes: 1 MiB and up


def expect(profile: Profile, facts: Facts) -> list[Expectation]:
    n = profile.world
    alpha, beta, basis = alpha_beta(facts, profile.device)
    peak, _ = link_peak_or_why(facts)
    top, sized = nccl_tests_max_bytes(profile.sweep, card_bytes(facts))  # what nccl-tests' -e is on this card
    out = []
    for coll in COLLECTIVES:
        for size in profile.sweep.sizes():
            t = collective_time_s(coll, size, n, alpha, beta)
            out.append(
                Expectation(
                    stage=NAME,
                    case=coll,
                    metric="time_us",
                    value=t * 1e6,
                    unit="us",
                    basis=basis,
                    size_bytes=size,
                    world=n,
                    source="model",
                )
            )
        out.append(
            Expectation(
                stage=NAME,
                case=coll,
                metric="wrong",
                value=0,
                unit="count",
                basis="every element equals its known expected value",
                world=n,
            )
        )
        if peak is not None and len(profile.nodes) < 2:
            share = _intra_judges.floor_share(peak)
            out.append(
                Expectation(
                    stage=NAME,
                    case=coll,
                    metric="busbw_min",
                    value=share * peak.per_gpu_GBps,
                    unit="GB/s",
                    basis=f"{share:.0%} × {peak.basis}; {sized}",
                    world=n,
                    size_bytes=top,
                )
            )
    # across nodes: held to the NICs, each node to its link
    return out + bandwidth_nodes.expect(profile, facts)


def sweep_args(profile: Profile) -> list[str]:
    """The torch sweep's arguments: the profile's sizes and iterations (the intra-node sweeps take the
    same)."""
    s = profile.sweep
    return [
        "--sizes",
        ",".join(str(x) for x in s.sizes()),
        "--warmup",
        str(s.warmup_iters),
        "--iters",
        str(s.iters),
        "--dtype",
        s.dtype,
        "--stage",
        NAME,
    ]


TORCH_TIME_SHARE = {"cuda": 0.4, "cpu": 0.8}
"""Share of the stage's time left the torch sweep may take: on GPUs the six nccl-tests binaries follow it."""
LAUNCH_RESERVE_S = 30.0
"""Kept back from the torch sweep's budget for its launch and the probe (a torchrun launch on a GPU node: ~25
s)."""


def sweep_time_args(profile: Profile, left_s: float | None) -> list[str]:
    """--time-budget-s for the torch sweep (suite/costmodel/size_budget.py): its share of the time left, less
    the launch."""
    if not profile.sweep.time_box or left_s is None:
        return []
    budget = max(1.0, left_s * TORCH_TIME_SHARE[profile.device] - LAUNCH_RESERVE_S)
    return ["--time-budget-s", f"{budget:.1f}"]


def run(profile: Profile, ctx: StageContext) -> list[Row]:
    args = sweep_args(profile) + ["--probe"]
    if profile.is_rehearsal:  # the harness-overhead figure: a bare dist.all_reduce loop at the largest size
        args += ["--bare-repeats", "1"]
    args += sweep_time_args(profile, ctx.time_left())
    ctx.say(f"torch sweep: {len(COLLECTIVES)} collectives × {len(profile.sweep.sizes())} sizes")
    with sampling(ctx.raw_dir, NAME, period_ms=period_for(profile)) as samples:  # power and clocks meanwhile
        rows = launch_rows(ctx, "suite.workloads.collective_sweep", args, tag="torch")
        ctx.keep(rows, tag="torch")  # in the run directory now: a kill later in the stage loses none of them
        # across nodes: the pair matrix, each node's sweep
        rows += bandwidth_nodes.measure(ctx, sweep_args(profile))
        # whatever became of the torch sweep: one tool's failure never hides the other's
        if profile.device == "cuda":
            rows += _nccl_tests.sweep(profile, ctx, list(COLLECTIVES), on_binary=ctx.keep)
    rows += samples.rows()
    rows, published = with_fit(rows, profile.world, _nccl_tests.form_label(profile))
    rows, intra = bandwidth_nodes.with_fit(rows, _nccl_tests.form_label(profile.with_overrides(nodes=())))
    for key, value in {**published, **intra}.items():
        ctx.publish(key, value)
    return rows


def with_fit(
    rows: list[Row], world: int, nccl_tests_form: str | None = None
) -> tuple[list[Row], dict[str, Any]]:
    """The sweep's rows plus the α-β fit rows, and the fit later stages use (run() and `suite ingest` alike);
    `nccl_tests_form` says which form of nccl-tests measured it, where known."""
    fits, best = fit_and_pick(rows, world, nccl_tests_form)
    return rows + fits, ({"alpha_beta": best} if best else {})


# ---------------------------------------------------------------- judge

VERDICTS = verdicts_for(NAME)


def curves(rows: list[Row], source: str) -> dict[str, dict[int, float]]:
    """collective → size → best busbw over placements, for one source."""
    out: dict[str, dict[int, float]] = defaultdict(dict)
    for r in rows:
        if r.source == source and r.metric == "busbw" and r.case in COLLECTIVES and math.isfinite(r.value):
            out[r.case][r.size_bytes] = max(r.value, out[r.case].get(r.size_bytes, -1.0))
    return out


def judge(rows: list[Row], expectations: list[Expectation], facts: Facts) -> list[Verdict]:
    verdicts = [judge_coverage(rows, facts)] + launch_verdicts(NAME, rows)
    verdicts += judge_dropped(rows)
    verdicts += judge_wrong(rows)
    verdicts += probe_verdicts(NAME, rows)
    verdicts += throttle_verdicts(
        rows, stage=NAME, on_gpu=judges_performance(facts), ingested=ingested(facts)
    )
    verdicts += judge_nccl_tests(rows, facts)
    verdicts.append(judge_fit(rows, judges_performance(facts)))
    verdicts += bandwidth_nodes.judge(rows, expectations, facts)
    across = bandwidth_nodes.across(facts)
    if not judges_performance(facts):
        floors = (
            bandwidth_nodes.floors_text(expectations)
            if across
            else f"large-message busbw ≥ {PEAK_SHARE:.0%} of the link peak"
        )
        expected = f"{floors}; no dip > {DIP:.0%}; torch within {TORCH_LOSS:.0%} of nccl-tests"
        return verdicts + [VERDICTS.cpu_skip("performance", expected)]
    world = max((r.world or 0 for r in rows if r.source in ("torch", "nccl-tests")), default=0)
    if world < 2:
        return verdicts + [
            VERDICTS.not_applicable(
                "performance",
                expected="2 or more GPUs",
                observed=f"world of {world}",
                why="one GPU has no link to measure: "
                "bus bandwidth is 0 by definition (busbw factor 2(n−1)/n = 0)",
            )
        ]
    torch_c, nccl_c = curves(rows, "torch"), curves(rows, "nccl-tests")
    # the library at its best, where it ran
    top, top_source = (
        nccl_c or torch_c,
        "nccl-tests" if nccl_c else "torch",
    )
    verdicts += (
        bandwidth_nodes.judge_peak(top, top_source, facts, rows)
        if across  # held to the NICs, not the link
        else judge_peak(top, top_source, expectations, facts)
    )
    for source, c in (("torch", torch_c), ("nccl-tests", nccl_c)):
        verdicts += [judge_dip(source, coll, curve) for coll, curve in sorted(c.items())]
    verdicts += judge_torch_vs_nccl(torch_c, nccl_c)
    return verdicts


def judge_coverage(rows: list[Row], facts: dict | None = None) -> Verdict:
    if not_captured(facts or {}, "torch"):
        return VERDICTS.live_only_skip(
            "torch_sweep", f"busbw rows for {', '.join(COLLECTIVES)}", "torch sweep"
        )
    seen = {r.case for r in rows if r.source == "torch" and r.metric == "busbw" and r.case in COLLECTIVES}
    one_rank = {r.world for r in rows if r.source == "torch" and r.metric == "busbw"} == {1}
    # no peer on one rank
    missing = [c for c in COLLECTIVES if c not in seen and not (one_rank and c == "sendrecv")]
    return VERDICTS.check(
        "torch_sweep",
        not missing,
        expected=f"busbw rows for {', '.join(COLLECTIVES)}",
        observed=f"missing {', '.join(missing)}" if missing else f"{len(seen)} collectives swept",
        reason_ok="every collective swept over the profile's sizes",
        reason_bad=f"the torch sweep measured nothing for {', '.join(missing)}: see "
        f"raw/bandwidth/torch.rank0.log",
    )


def judge_dropped(rows: list[Row]) -> list[Verdict]:
    """A warn per tool that left sizes out (for memory, or for the stage's time), naming them and why; none
    when every size ran."""
    out = []
    for source in ("torch", "nccl-tests"):
        dropped = [r for r in rows if r.metric == "dropped" and r.source == source and r.case in COLLECTIVES]
        if not dropped:
            continue
        by_case: dict[str, list[int]] = defaultdict(list)
        for r in dropped:
            if r.size_bytes not in by_case[r.case]:
                by_case[r.case].append(r.size_bytes)
        listed = "; ".join(
            f"{c}: {', '.join(size_text(b) for b in sorted(sizes))}" for c, sizes in by_case.items()
        )
        why = sorted({r.text for r in dropped if r.text})
        out.append(
            VERDICTS.warn(
                f"dropped.{source}",
                expected="every size of the sweep measured",
                observed=f"{len(dropped)} case(s) not run: {listed}",
                reason="; ".join(why[:3]) + (f" (and {len(why) - 3} more)" if len(why) > 3 else ""),
            )
        )
    return out


def judge_wrong(rows: list[Row]) -> list[Verdict]:
    bad: dict[tuple[str, str], list[str]] = defaultdict(list)
    checked: set[tuple[str, str]] = set()
    for r in rows:
        if r.metric == "wrong" and r.case in COLLECTIVES and r.source in ("torch", "nccl-tests"):
            checked.add((r.source, r.case))
            if r.value != 0:
                bad[(r.source, r.case)].append(f"{r.size_bytes} B {r.placement}: {r.value:g}")
    out = []
    for source, coll in sorted(checked):
        wrong = bad.get((source, coll), [])
        out.append(
            VERDICTS.check(
                f"wrong.{source}.{coll}",
                not wrong,
                expected="0 wrong elements at every size",
                observed="; ".join(wrong[:6]) or "0",
                reason_ok="every result equals its expected value",
                reason_bad=f"{source} {coll} returned wrong values: a broken link, driver or library — "
                f"rerun that size alone and check dmesg / nvidia-smi -q for errors",
            )
        )
    return out


def judge_nccl_tests(rows: list[Row], facts: dict) -> list[Verdict]:
    # not the nodes' own (intra.nccl-tests.…@node: _intra_node)
    status = [
        r
        for r in rows
        if r.metric == "status"
        and r.source == "nccl-tests"
        and r.algo is None
        and r.case.startswith("nccl-tests.")
    ]
    if not status:
        prof = profile_or_none(facts)
        on_gpu = prof is not None and prof.device == "cuda"
        return [
            VERDICTS.skip(
                "nccl_tests",
                expected="nccl-tests on the GPUs",
                observed="not run" if on_gpu else "CPU profile",
                reason="nccl-tests needs GPUs; the rehearsal runs the torch sweep only",
            )
        ]
    out = []
    for r in status:
        coll = r.case.split(".", 1)[1]
        kind, _, text = (r.text or "").partition(": ")
        # stopped: for time; cut: an ingested capture that stops short without an error (rows_from_output)
        state = {"complete": "pass", "missing": "skip", "stopped": "warn", "cut": "skip"}.get(kind, "fail")
        out.append(
            VERDICTS.verdict(
                f"nccl_tests.{coll}",
                state,
                expected=f"{_nccl_tests.PROGRAMS[coll]} runs to its footer",
                observed=kind,
                reason=text,
            )
        )
    return out


def judge_fit(rows: list[Row], on_gpu: bool = True) -> Verdict:
    """α and β fitted (pass), or why not. On CPU (`on_gpu` False) a fit is shown, never judged: gloo's times
    on shared cores are as much the machine's load as the sizes (with four busy loops on two cores the slope
    came out ≤ 0 in some runs and not others), so β there is a figure, and "β not measurable on this CPU" is a
    skip."""
    fits = {(r.source, r.metric): r.value for r in rows if r.case == "fit.all_reduce"}
    sources = sorted({s for s, _ in fits})
    world = max((r.world or 0 for r in rows if r.case == "all_reduce" and r.metric == "time_us"), default=0)
    if not sources and world == 1:
        return VERDICTS.not_applicable(
            "fit",
            expected="α and β fitted from all_reduce",
            observed="one rank",
            why="one rank sends nothing: there is no α or β to fit; later stages use their defaults",
        )
    sizes = {r.size_bytes for r in rows if r.case == "all_reduce" and r.metric == "time_us" and r.size_bytes}
    if not sources and len(sizes) == 1:  # a capture of one size (nccl-tests -b = -e): a line needs two points
        return VERDICTS.skip(
            "fit",
            expected="α and β fitted from all_reduce",
            observed=f"all_reduce timed at one size ({next(iter(sizes))} B)",
            reason="a line needs two sizes: later stages use the default α and the link peak as β",
        )
    if not sources:
        return VERDICTS.fail(
            "fit",
            expected="α and β fitted from all_reduce",
            observed="no all_reduce timings",
            reason="nothing to fit: the all_reduce sweep produced no times",
        )
    observed = "; ".join(
        f"{s}: α = {fits[(s, 'alpha')]:.3g} µs, β = {fits[(s, 'beta')]:.3g} GB/s, "
        f"rms residual {fits[(s, 'rms_rel_residual')]:.0%}"
        for s in sources
    )
    usable = [s for s in sources if math.isfinite(fits.get((s, "beta"), math.inf)) and fits[(s, "beta")] > 0]
    if not on_gpu:
        return VERDICTS.skip(
            "fit",
            expected="α and β fitted from all_reduce",
            observed=observed,
            reason=(
                "fitted and published as facts['alpha_beta'], not judged: "
                if usable
                else "β not measurable on this CPU (time does not grow with size in these points); "
                "later stages use their defaults, and "
            )
            + "on CPU ranks gloo's times say how busy the machine is as much as the link",
        )
    return VERDICTS.check(
        "fit",
        bool(usable),
        bad="warn",
        expected="α and β fitted from all_reduce",
        observed=observed,
        reason_ok="published as facts['alpha_beta'] for the later stages",
        reason_bad="time does not grow with size in these points (noise?): no β to publish; "
        "later stages use their defaults — raise the profile's sweep.iters and rerun the stage",
    )


def judge_peak(
    c: dict[str, dict[int, float]], source: str, expectations: list[Expectation], facts: dict
) -> list[Verdict]:
    floor_or_skip = _intra_judges.link_floor(facts, "peak", f"{PEAK_SHARE:.0%} of the link peak")
    if isinstance(floor_or_skip, Verdict):
        return [floor_or_skip]
    peak, floor = floor_or_skip
    out = []
    for coll, curve in sorted(c.items()):
        size = max(curve)
        got = curve[size]
        out.append(
            VERDICTS.check(
                f"peak.{coll}",
                got >= floor,
                bad="warn" if peak.staged else "fail",
                expected=f"busbw ≥ {floor:.1f} GB/s ({_intra_judges.floor_share(peak):.0%} × {peak.basis})",
                observed=f"{got:.1f} GB/s at {size} B ({source})",
                reason_ok="large messages reach the link",
                reason_bad=(
                    f"{coll} reaches {got / peak.per_gpu_GBps:.0%} of the ring's slowest hop, which "
                    f"crosses the CPUs through host memory: the CPU interconnect and NCCL's SHM path "
                    f"set the rate there, not the link (by design on this box; keep such pairs out of "
                    f"tensor-parallel groups)"
                    if peak.staged
                    else f"{coll} reaches {got / peak.per_gpu_GBps:.0%} of the link: check "
                    f"`nvidia-smi topo -m` (a pair on PCIe/SYS), NCCL_P2P_DISABLE/NCCL_SHM_DISABLE, "
                    f"and NCCL_DEBUG=INFO's transport"
                ),
            )
        )
    return out


def judge_dip(source: str, coll: str, curve: dict[int, float]) -> Verdict:
    sizes = [s for s in sorted(curve) if s >= LARGE_BYTES]
    dips = [
        f"{a}→{b} B: {curve[a]:.2f}→{curve[b]:.2f} GB/s"
        for a, b in zip(sizes, sizes[1:])
        if curve[a] > 0 and curve[b] < (1 - DIP) * curve[a]
    ]
    return VERDICTS.check(
        f"dip.{source}.{coll}",
        not dips,
        bad="warn",
        expected=f"no drop > {DIP:.0%} between consecutive sizes ≥ {LARGE_BYTES} B",
        observed="; ".join(dips) or f"{len(sizes)} large sizes, no dip",
        reason_ok="the curve rises or holds",
        reason_bad="a step down in the curve: a protocol/algorithm switch or another job on the link — "
        "rerun that size range with NCCL_DEBUG=INFO",
    )


def judge_torch_vs_nccl(torch_c: dict, nccl_c: dict) -> list[Verdict]:
    if not nccl_c:
        return [
            VERDICTS.skip(
                "torch_vs_nccl",
                expected="nccl-tests rows to compare",
                observed="no nccl-tests rows",
                reason="nccl-tests did not run: nothing to hold the torch sweep to",
            )
        ]
    out = []
    for coll in sorted(set(torch_c) & set(nccl_c)):
        common = sorted(set(torch_c[coll]) & set(nccl_c[coll]))
        if not common:
            continue
        size = common[-1]
        t, n = torch_c[coll][size], nccl_c[coll][size]
        out.append(
            VERDICTS.check(
                f"torch_vs_nccl.{coll}",
                t >= (1 - TORCH_LOSS) * n,
                bad="warn",
                expected=f"torch busbw ≥ {1 - TORCH_LOSS:.0%} of nccl-tests' at {size} B",
                observed=f"torch {t:.1f} GB/s, nccl-tests {n:.1f} GB/s",
                reason_ok="torch reaches the library's bandwidth",
                reason_bad="the harness is losing bandwidth: stream synchronisation or allocation inside the "
                "timed loop",
            )
        )
    return out


def headline(rows: list[Row], verdicts: list[Verdict], expectations: list[Expectation]) -> str | None:
    """all_reduce busbw at the largest size (nccl-tests where it ran, else torch) against the 70%-of-peak
    floor; on a multi-node run the slowest node's intra-node figure beside the one across nodes, each with its
    floor."""
    for source in ("nccl-tests", "torch"):
        top = hl.last(rows, "all_reduce", "busbw", key="size_bytes", source=source)
        if top is not None:
            break
    else:
        return None
    floor = hl.matching(expectations, "all_reduce", "busbw_min")
    intra = bandwidth_nodes.headline_part(rows, expectations)
    if intra:
        inter = f"≥ {hl.number(floor[0].value)}" if floor else "no ceiling known"
        return (
            f"all_reduce busbw {intra[0]} vs inter {hl.number(top.value)} GB/s at {hl.size(top.size_bytes)} "
            f"({source}) · expected intra {intra[1]}, inter {inter}"
        )
    against = f"expected ≥ {hl.number(floor[0].value)}" if floor else "no link peak to hold it to"
    return f"all_reduce busbw {hl.number(top.value)} GB/s at {hl.size(top.size_bytes)} ({source}) · {against}"


STAGE = Stage(
    row=2,
    after=("topology",),  # the GPU model and link class from facts["topology"]
    title="nccl-tests `*_perf` 8 B → 8 GB and the same sweep through torch.distributed",
    measures="bus bandwidth of every collective over message sizes (torch.distributed and nccl-tests)",
    wrong="large-message busbw below 70% of the link's per-direction peak; a dip in the curve; any #wrong > "
    "0",
    rehearsal="the torch sweep on gloo with nccl-tests' columns, every result checked elementwise",
    config=CONFIG,
    estimate=estimate,
    expect=expect,
    run=run,
    judge=judge,
    headline=headline,
)
