"""The bandwidth stage's split on a multi-node run: every node's own intra-node sweep beside the sweep across nodes.

    rows += _intra_node.measure(ctx, sweep_args)     # bandwidth.run, only when profile.nodes has 2+ nodes

Every node at once runs `python -m suite.nodesweep` (multilaunch.run_on_each_node: here on the first node, over
ssh or one srun on the others), which is a single-node launch of the torch sweep with the node's nproc ranks (the
launcher a one-node run uses; no rendezvous across nodes) and, on GPUs, nccl-tests in its single-node form
(`mpirun -np <nproc>` on that node, or one process `-g <nproc>`: no hostfile, no other node). Each node's raw
output stays in raw/bandwidth/<node>/ (intra.*.log, the *_perf.out files) and its rows in
<node>/intra-rows.jsonl, read back here and renamed so that nothing that reads the cross-node rows sees them:
case `intra.<case>@<node>` (`intra.all_reduce@gpu-a`, `intra.nccl-tests.all_reduce@gpu-a`, `intra.fit.all_reduce@gpu-a`),
and a failed launch `launch.intra@<node>` (bandwidth's launch verdicts name it). The cross-node rows keep their
plain cases: on a multi-node run they are the inter-node measurement.

Expectations: intra-node large-message busbw ≥ 70% of the link peak on every node (the single-node floor);
inter-node ≥ 70% of min(link peak, NIC line rate × NICs per node): one node sends to the others through all its
NICs at once (topology's facts['node_nics']), and a ring across nodes runs no faster than its slowest node's NICs.
facts['alpha_beta_intra'] is the α-β fit of the slowest node's intra all_reduce (the one a hierarchical
collective waits for), shaped as facts['alpha_beta'], which stays the fit across every node.
Not a stage: the underscore keeps it out of discovery.
"""

from __future__ import annotations

import dataclasses
import json
import math
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, Sequence

from ..config import Profile
from ..facts import FittedAlphaBeta, link_peak_or_why
from ..multinode import parse_nodes
from ..results import Expectation, Row, Verdict, read_rows_jsonl
from ..verdicts import judges_performance, verdicts_for
from . import _nccl_tests
from ._alphabeta_fit import fit_rows, pick_fit
from ._launches import CASE_PREFIX, launch_rows

STAGE = "bandwidth"
TAG = "intra"
PREFIX = "intra."
ROWS_FILE = "intra-rows.jsonl"
LOG_NAME = "intra.log"
COLLECTIVES = tuple(_nccl_tests.PROGRAMS)
PEAK_SHARE = 0.7  # the bandwidth stage's floor: 70% of the ceiling, within a node and across nodes
SOURCES = ("nccl-tests", "torch")  # the curve a floor is judged on: nccl-tests' where it ran, else torch's
V = verdicts_for(STAGE)


# ---------------------------------------------------------------- names


def node_names(profile_or_nodes) -> list[str]:
    """The nodes that run an intra-node sweep: every node of a multi-node run with a link inside it (2+ ranks
    per node); none on one node (the stage's own sweep is the intra-node one there)."""
    if isinstance(profile_or_nodes, Profile):
        if profile_or_nodes.nproc < 2:
            return []
        profile_or_nodes = profile_or_nodes.nodes
    nodes = tuple(profile_or_nodes or ())
    return [n.name for n in parse_nodes(nodes)] if len(nodes) > 1 else []


def intra_case(case: str, node: str) -> str:
    """A node's row case: `intra.all_reduce@gpu-a`; a failed launch stays a launch, `launch.intra@gpu-a`."""
    return f"{case}@{node}" if case.startswith(CASE_PREFIX) else f"{PREFIX}{case}@{node}"


def split_case(case: str) -> tuple[str, str] | None:
    """`intra.all_reduce@gpu-a` → ('all_reduce', 'gpu-a'); None for a case that is not a node's (a host name
    never holds '@')."""
    if not case.startswith(PREFIX) or "@" not in case:
        return None
    inner, _, node = case[len(PREFIX):].rpartition("@")
    return inner, node


def relabel(rows: Sequence[Row], node: str) -> list[Row]:
    out = []
    for r in rows:
        text = r.text.replace(f"raw/{STAGE}/", f"raw/{STAGE}/{node}/") if r.text else r.text
        out.append(Row(**{**r.to_dict(), "case": intra_case(r.case, node), "text": text}))
    return out


# ---------------------------------------------------------------- on each node (suite/nodesweep.py)


def node_argv(profile: Profile, sweep_args: Sequence[str], timeout_s: float | None = None,
              python: str = sys.executable) -> list[str]:
    """What every node runs: the suite's per-node sweep, given the profile as one node sees it (its own ranks)."""
    single = profile.with_overrides(nodes=())
    return [python, "-m", "suite.nodesweep", "--profile-json", json.dumps(single.to_dict(), separators=(",", ":")),
            *(["--timeout-s", f"{timeout_s:.0f}"] if timeout_s else []), "--", *sweep_args]


class NodeContext:
    """The part of a StageContext that launch_rows and the nccl-tests adapter use, on a node that is not the
    suite's: this node's raw folder, a single-node launch, progress to the node's log."""

    stage = STAGE

    def __init__(self, profile: Profile, raw_dir: Path, deadline: float | None) -> None:
        self.profile, self.raw_dir, self.deadline = profile, Path(raw_dir), deadline

    def say(self, message: str, done: int | None = None, of: int | None = None) -> None:
        print(message + (f" ({done}/{of})" if of else ""), flush=True)

    def time_left(self) -> float | None:
        return None if self.deadline is None else max(1.0, self.deadline - time.monotonic())

    def torchrun(self, module: str, args: Sequence[str] = (), *, tag: str = "", **kwargs):
        from ..forklaunch import launch

        kwargs.setdefault("timeout_s", self.time_left())
        return launch(self.profile, module, args, raw_dir=self.raw_dir, tag=tag, **kwargs)


def on_this_node(ctx: NodeContext, sweep_args: Sequence[str]) -> list[Row]:
    """This node's torch sweep, then (on GPUs) its nccl-tests in the single-node form, whatever became of the other."""
    ctx.say(f"intra-node torch sweep: {ctx.profile.nproc} ranks")
    rows = launch_rows(ctx, "suite.workloads.collective_sweep", list(sweep_args), tag=TAG)
    if ctx.profile.device == "cuda":
        rows += _nccl_tests.sweep(ctx.profile, ctx, list(COLLECTIVES))
    return rows


# ---------------------------------------------------------------- on the first node


def measure(ctx, sweep_args: Sequence[str]) -> list[Row]:
    """Every node's intra-node sweep at once; its rows renamed for its node, a node that wrote none a failed launch."""
    from ..multilaunch import run_on_each_node

    names = node_names(ctx.profile)
    if not names:
        return []
    for name in names:  # a resumed stage: an earlier attempt's rows are not this one's
        (ctx.raw_dir / name / ROWS_FILE).unlink(missing_ok=True)
    ctx.say(f"intra-node sweep on each of {len(names)} nodes at once ({ctx.profile.nproc} ranks each)")
    left = ctx.time_left()
    argv = node_argv(ctx.profile, sweep_args, timeout_s=left)
    run_on_each_node(ctx.profile, argv, raw_dir=ctx.raw_dir, log_name=LOG_NAME,
                     timeout_s=left if left is not None else 3600.0)
    rows: list[Row] = []
    for name in names:
        path = ctx.raw_dir / name / ROWS_FILE
        if path.is_file():
            rows += relabel(read_rows_jsonl(path), name)
        else:
            rows.append(Row(stage=STAGE, case=f"{CASE_PREFIX}{TAG}@{name}", metric="status", value=0.0, unit="count",
                            source="torchrun", text=f"the intra-node sweep on node {name} wrote no rows: see "
                                                    f"raw/{STAGE}/{name}/{LOG_NAME}"))
    return rows


def by_node(rows: Sequence[Row]) -> dict[str, list[Row]]:
    """Each node's intra rows under their plain cases (as the node measured them)."""
    out: dict[str, list[Row]] = defaultdict(list)
    for r in rows:
        split = split_case(r.case)
        if split:
            out[split[1]].append(Row(**{**r.to_dict(), "case": split[0]}))
    return dict(out)


def with_fit(rows: list[Row], nccl_tests_form: str | None = None) -> tuple[list[Row], dict[str, Any]]:
    """Each node's α-β fit rows (`intra.fit.all_reduce@<node>`), and facts['alpha_beta_intra']: the slowest node's
    fit (smallest β), shaped as facts['alpha_beta']; nothing when no node gave a usable fit."""
    fits: list[Row] = []
    best: dict[str, FittedAlphaBeta] = {}
    for node, mine in sorted(by_node(rows).items()):
        world = max((r.world or 0 for r in mine if r.case == "all_reduce"), default=0)
        node_fits = fit_rows(mine, world)
        fits += relabel(node_fits, node)
        picked = pick_fit(node_fits)
        if picked is not None:
            if picked.source == "nccl-tests" and nccl_tests_form:
                picked = dataclasses.replace(picked, nccl_tests_form=nccl_tests_form)
            best[node] = picked
    if not best:
        return rows + fits, {}
    slowest = min(best, key=lambda n: best[n].beta_Bps)
    return rows + fits, {"alpha_beta_intra": best[slowest]}


# ---------------------------------------------------------------- expectations


def inter_ceiling(facts: dict) -> tuple[float | None, str]:
    """The inter-node busbw ceiling, GB/s, and what sets it: min(link peak, NIC line rate × NICs per node of the
    slowest node); (None, why) when neither is known."""
    peak, why = link_peak_or_why(facts)
    nics = {n: v for n, v in (facts.get("node_nics") or {}).items() if (v or {}).get("total_gbps")}
    options: list[tuple[float, str]] = []
    if nics:
        node, v = min(nics.items(), key=lambda kv: kv[1]["total_gbps"])
        count, line, total = int(v.get("nics") or 0), float(v.get("line_gbps") or 0), float(v["total_gbps"])
        options.append((total / 8, f"the NICs: {count} × {line:g} Gb/s on node {node} = {total / 8:g} GB/s"))
    if peak is not None:
        options.append((peak.per_gpu_GBps, f"the link peak: {peak.basis}"))
    if not options:
        return None, f"{why}; no NIC rate known (topology's facts['node_nics'])"
    value, basis = min(options)
    if len(options) == 2:
        other = max(options)[1]
        basis += f" (below {other})" if max(options)[0] > value else f" (= {other})"
    return value, basis


def expect(profile: Profile, facts: dict) -> list[Expectation]:
    """Per node and collective: 0 wrong, and busbw ≥ 70% of the link peak where the peak is known; across nodes:
    busbw ≥ 70% of the inter-node ceiling (the stage's own floor for the plain cases on a multi-node run)."""
    names = node_names(profile)
    out: list[Expectation] = []
    peak, _ = link_peak_or_why(facts)
    for node in names:
        for coll in COLLECTIVES:
            case = intra_case(coll, node)
            out.append(Expectation(stage=STAGE, case=case, metric="wrong", value=0, unit="count", world=profile.nproc,
                                   basis=f"every element equals its known expected value (node {node})"))
            if peak is not None:
                out.append(Expectation(stage=STAGE, case=case, metric="busbw_min", world=profile.nproc,
                                       value=PEAK_SHARE * peak.per_gpu_GBps, unit="GB/s",
                                       size_bytes=profile.sweep.max_bytes,
                                       basis=f"intra-node: {PEAK_SHARE:.0%} × {peak.basis}"))
    return out


def inter_floors(profile: Profile, facts: dict) -> list[Expectation]:
    """The cross-node sweep's floor on a multi-node run (replacing the single-node link-peak floor)."""
    ceiling, basis = inter_ceiling(facts)
    if ceiling is None:
        return []
    return [Expectation(stage=STAGE, case=coll, metric="busbw_min", value=PEAK_SHARE * ceiling, unit="GB/s",
                        basis=f"inter-node: {PEAK_SHARE:.0%} × {basis}", world=profile.world,
                        size_bytes=profile.sweep.max_bytes) for coll in COLLECTIVES]


def estimate_s(p) -> float:
    """`make plan`'s seconds (p: suite.plan.PlanInputs): each node's single-node launch and nccl-tests sweep at
    once, at the link's β within a node (not the NIC's); 0 on one node."""
    from ..gpus import gpu_for
    from ..plan import sweep_time_s

    nodes = p.assume.nodes
    if nodes < 2:
        return 0.0
    per_node = p.gpus // nodes
    if per_node < 2:
        return 0.0
    gpu = gpu_for(p.assume.gpu_name)
    link = p.assume.beta_Bps or ((gpu.nvlink_full_GBps or gpu.pcie_x16_GBps) * 1e9 if gpu else p.beta_Bps)
    bus = sum(sweep_time_s(c, p.sizes, per_node, p.alpha_s, link, p.repeats) for c in COLLECTIVES)
    torch_bus = sum(sweep_time_s(c, p.sizes, per_node, p.alpha_s, link, p.repeats, placements=1) for c in COLLECTIVES)
    launch = p.assume.torchrun_launch_s - p.assume.rendezvous_s  # one node's own launch: no rendezvous
    return launch + torch_bus + len(COLLECTIVES) * p.assume.nccl_tests_launch_s + bus


# ---------------------------------------------------------------- judge


def curves(rows: Sequence[Row], source: str) -> dict[str, dict[str, dict[int, float]]]:
    """node → collective → size → best busbw over placements, of one source's intra-node rows."""
    out: dict[str, dict[str, dict[int, float]]] = defaultdict(lambda: defaultdict(dict))
    for r in rows:
        split = split_case(r.case)
        if split and split[0] in COLLECTIVES and r.source == source and r.metric == "busbw" and math.isfinite(r.value):
            curve = out[split[1]][split[0]]
            curve[r.size_bytes] = max(r.value, curve.get(r.size_bytes, -1.0))
    return {n: dict(c) for n, c in out.items()}


def chosen_curves(rows: Sequence[Row]) -> tuple[str, dict[str, dict[str, dict[int, float]]]]:
    for source in SOURCES:
        c = curves(rows, source)
        if c:
            return source, c
    return SOURCES[-1], {}


def expected_nodes(facts: dict) -> list[str]:
    prof = facts.get("profile") or {}
    return node_names(tuple(prof.get("nodes") or ())) if int(prof.get("nproc") or 0) >= 2 else []


def judge(rows: list[Row], expectations: list[Expectation], facts: dict) -> list[Verdict]:
    """Nothing on one node; else every node swept and exact, the nccl-tests intra runs complete, and (on GPUs)
    every node's large-message busbw at its floor."""
    nodes = expected_nodes(facts)
    if not nodes:
        if len((facts.get("profile") or {}).get("nodes") or ()) > 1:
            return [V.skip("intra_sweep", expected="an intra-node sweep on every node", observed="1 rank per node",
                           reason="one rank per node has no link inside the node: run with --nproc 2 or more")]
        return []
    out = [judge_coverage(rows, nodes), *judge_wrong(rows), *judge_nccl_tests(rows, facts)]
    if not judges_performance(facts):
        return out
    source, c = chosen_curves(rows)
    return out + judge_intra_peak(c, source, nodes, facts)


def judge_coverage(rows: Sequence[Row], nodes: Sequence[str]) -> Verdict:
    seen = {(n, coll) for n, per in curves(rows, "torch").items() for coll in per}
    missing = {n: [c for c in COLLECTIVES if (n, c) not in seen] for n in nodes}
    missing = {n: cs for n, cs in missing.items() if cs}
    return V.check("intra_sweep", not missing, expected=f"busbw rows for {', '.join(COLLECTIVES)} on every node",
                   observed="; ".join(f"node {n}: missing {', '.join(cs)}" for n, cs in missing.items())
                   or f"{len(nodes)} nodes × {len(COLLECTIVES)} collectives",
                   reason_ok="every node swept every collective within itself",
                   reason_bad="a node's intra-node sweep measured nothing for these: see "
                              f"raw/{STAGE}/<node>/{LOG_NAME} and <node>/{TAG}.rank0.log")


def judge_wrong(rows: Sequence[Row]) -> list[Verdict]:
    bad: dict[tuple[str, str], list[str]] = defaultdict(list)
    checked: set[tuple[str, str]] = set()
    for r in rows:
        split = split_case(r.case)
        if split and split[0] in COLLECTIVES and r.metric == "wrong" and r.source in SOURCES:
            checked.add((r.source, split[0]))
            if r.value != 0:
                bad[(r.source, split[0])].append(f"node {split[1]} {r.size_bytes} B {r.placement}: {r.value:g}")
    return [V.check(f"intra_wrong.{source}.{coll}", not bad.get((source, coll)),
                    expected="0 wrong elements at every size on every node",
                    observed="; ".join(bad.get((source, coll), [])[:6]) or "0",
                    reason_ok="every node's results equal their expected values",
                    reason_bad=f"{source} {coll} returned wrong values inside the node named: its GPUs, NVLink or "
                               "driver — check that node's dmesg / nvidia-smi -q for errors")
            for source, coll in sorted(checked)]


def judge_nccl_tests(rows: Sequence[Row], facts: dict) -> list[Verdict]:
    """One verdict per collective over every node's nccl-tests status: complete everywhere, else the nodes named."""
    per: dict[str, dict[str, tuple[str, str]]] = defaultdict(dict)
    for r in rows:
        split = split_case(r.case)
        if split and split[0].startswith("nccl-tests.") and r.metric == "status" and r.source == "nccl-tests":
            kind, _, text = (r.text or "").partition(": ")
            per[split[0].split(".", 1)[1]][split[1]] = (kind, text)
    out = []
    for coll, nodes in sorted(per.items()):
        states = {n: {"complete": "pass", "missing": "skip"}.get(k, "fail") for n, (k, _) in nodes.items()}
        worst = "fail" if "fail" in states.values() else "skip" if "skip" in states.values() else "pass"
        short = [f"node {n}: {nodes[n][0]}: {nodes[n][1]}" for n, s in sorted(states.items()) if s != "pass"]
        out.append(V.verdict(f"intra_nccl_tests.{coll}", worst,
                             expected=f"{_nccl_tests.PROGRAMS[coll]} runs to its footer on every node (single-node form)",
                             observed="; ".join(f"node {n}: {k}" for n, (k, _) in sorted(nodes.items())),
                             reason="; ".join(short) or f"complete on {len(nodes)} nodes"))
    return out


def judge_intra_peak(c: dict[str, dict[str, dict[int, float]]], source: str, nodes: Sequence[str],
                     facts: dict) -> list[Verdict]:
    peak, why = link_peak_or_why(facts)
    if peak is None:
        return [V.skip("intra_peak", expected=f"{PEAK_SHARE:.0%} of the link peak on every node", observed=why,
                       reason="no link peak to hold the nodes to: the topology stage found no known GPU")]
    floor = PEAK_SHARE * peak.per_gpu_GBps
    out = []
    for coll in COLLECTIVES:
        got = {n: (max(c[n][coll]), c[n][coll][max(c[n][coll])]) for n in nodes if c.get(n, {}).get(coll)}
        if not got:
            continue
        short = {n: v for n, v in got.items() if v[1] < floor}
        out.append(V.check(
            f"intra_peak.{coll}", not short, bad="warn" if peak.staged else "fail",
            expected=f"busbw ≥ {floor:.1f} GB/s on every node ({PEAK_SHARE:.0%} × {peak.basis})",
            observed="; ".join(f"node {n}: {b:.1f} GB/s at {s} B" for n, (s, b) in sorted(short.items()))
            or f"slowest node {min(got, key=lambda n: got[n][1])}: {min(v[1] for v in got.values()):.1f} GB/s ({source})",
            reason_ok="every node's GPUs reach their link",
            reason_bad=f"{coll} inside node(s) {', '.join(sorted(short))} stays below the link: that node's "
                       "`nvidia-smi topo -m` (a pair on PCIe/SYS), its fabric manager and NVLink state, "
                       "NCCL_P2P_DISABLE there — the other nodes show what it should reach"))
    return out


def judge_inter_peak(c: dict[str, dict[int, float]], source: str, facts: dict) -> list[Verdict]:
    """The cross-node curves (bandwidth's own) against 70% of the inter-node ceiling, saying which ceiling."""
    ceiling, basis = inter_ceiling(facts)
    if ceiling is None:
        return [V.skip("inter_peak", expected=f"{PEAK_SHARE:.0%} of min(link peak, NICs × line rate)",
                       observed=basis, reason="no ceiling to hold the cross-node sweep to: run topology first")]
    floor = PEAK_SHARE * ceiling
    out = []
    for coll, curve in sorted(c.items()):
        size = max(curve)
        out.append(V.check(
            f"inter_peak.{coll}", curve[size] >= floor,
            expected=f"busbw ≥ {floor:.1f} GB/s ({PEAK_SHARE:.0%} × {basis})",
            observed=f"{curve[size]:.1f} GB/s at {size} B across nodes ({source})",
            reason_ok="the collective across nodes reaches the inter-node ceiling",
            reason_bad=f"{coll} across nodes reaches {curve[size] / ceiling:.0%} of its ceiling, {basis}: NCCL on "
                       "TCP instead of IB/RoCE/EFA (NCCL_DEBUG=INFO says NET/Socket), GPUDirect RDMA off, fewer NICs "
                       "in use than the node has (NCCL_IB_HCA), or a port trained down — the p2p matrix names the pair"))
    return out


def floors_text(expectations: Sequence[Expectation]) -> str:
    """What the skipped performance verdicts would hold a multi-node run to: both floors, as computed."""
    intra = sorted({round(e.value, 3) for e in expectations if e.metric == "busbw_min" and split_case(e.case)})
    inter = [e for e in expectations if e.metric == "busbw_min" and e.case in COLLECTIVES and e.basis.startswith("inter")]
    parts = [f"intra-node busbw ≥ {intra[0]:g} GB/s on every node" if intra else
             f"intra-node busbw ≥ {PEAK_SHARE:.0%} of the link peak on every node"]
    parts.append(f"inter-node busbw ≥ {inter[0].value:.3g} GB/s ({inter[0].basis.removeprefix('inter-node: ')})"
                 if inter else
                 f"inter-node busbw ≥ {PEAK_SHARE:.0%} of min(link peak, NICs × line rate)")
    return "; ".join(parts)


def headline_part(rows: Sequence[Row], expectations: Sequence[Expectation]) -> tuple[str, str] | None:
    """('intra 420 GB/s (slowest of 2 nodes: gpu-b)', '≥ 315'): the slowest node's all_reduce busbw at its largest
    size and the intra-node floor, for bandwidth's headline; None on a run without intra-node rows."""
    source, c = chosen_curves(rows)
    got = {n: per["all_reduce"][max(per["all_reduce"])] for n, per in c.items() if per.get("all_reduce")}
    if not got:
        return None
    slowest = min(got, key=got.get)
    floor = sorted({e.value for e in expectations if e.metric == "busbw_min" and split_case(e.case)})
    where = f"slowest of {len(got)} nodes: {slowest}" if len(got) > 1 else f"node {slowest}"
    return f"intra {got[slowest]:.4g} GB/s ({where})", (f"≥ {floor[0]:.4g}" if floor else "no link peak known")
