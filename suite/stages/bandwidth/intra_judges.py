"""The bandwidth stage's intra- vs inter-node floors and verdicts on a multi-node run (the rows:
intra_node.py).

Within a node: large-message busbw ≥ 70% of the link peak on every node, as on one node (`intra_peak.<coll>`
names the nodes that fall short), every element exact (`intra_wrong.<source>.<coll>`), every collective swept
on every node (`intra_sweep`), nccl-tests' single-node form complete everywhere (`intra_nccl_tests.<coll>`).
Across nodes: the sweep over every node ≥ 70% of min(link peak, NIC line rate × NICs per node) of the slowest
node — one node sends to the others through all its NICs at once (topology's facts['node_nics']), and a ring
across nodes runs no faster than its slowest node's NICs (`inter_peak.<coll>` says which ceiling binds). On
the CPU rehearsal the floors are computed and shown; the performance verdicts skip (bandwidth's cpu_skip). Not
a stage: the underscore keeps it out of discovery.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Sequence

from suite.config import Profile
from suite.facts import LinkPeak, link_peak_or_why, profile_or_none
from suite.results import Expectation, Row, Verdict
from suite.stages import _nccl_tests
from suite.stages.bandwidth.intra_node import COLLECTIVES, LOG_NAME, TAG, intra_case, node_names, split_case
from suite.verdicts import judges_performance, verdicts_for

STAGE = "bandwidth"
PEAK_SHARE = 0.7  # the bandwidth stage's floor: 70% of the ceiling, within a node and across nodes
PCIE_SHARE = 0.4
"""The floor of a ring that runs over PCIe (direct P2P or staged through host memory): what real PCIe boxes
reach. Published all_reduce busbw on PCIe boxes (source, box, size: busbw, and its share of the suite's
per-direction link peak, suite/hardware/gpus.py PCIE_X16_GBps):
- NVIDIA/nccl issue 1639 (2025-03-14): 8x RTX 5090, PCIe Gen5 x16 (63 GB/s), -b 1G -e 8G: 28 GB/s (44%); 4 of
  them: 35 GB/s (56%). NCCL's maintainer: that is what a PCIe system delivers ("usually determined by the
  bandwidth your CPU and memory can deliver").
- tinygrad/open-gpu-kernel-modules issue 36 (tests/data/nccl-tests/28): 4x RTX 4090, Gen4 x16 (31.5 GB/s),
  direct P2P, 1 GiB: 25.95 GB/s (82%).
- tinygrad/open-gpu-kernel-modules pull 22 (2024-11-15): 4x RTX 4090, Gen4 x16, NCCL_P2P_LEVEL=SYS, 64 MiB
  (the largest row of the stored copy): 12.76 GB/s (41%), the lowest figure found on a working box: a share
  above ~40% would fail it.
- kalavai-net/kalavai-client scripts/README.md (tests/data/nccl-tests/15): 4x RTX 4090 in a container, 2 GiB:
  2.59 GB/s (8%), a run an expert calls broken, which this floor fails.
- NVIDIA/nccl issue 1530 (2024-12-02) and NVIDIA/nccl-tests issue 269 (2024-11-20): 8x RTX 4090 ring tables
  posted as poor; their rows are not in the stored copies, so no figure is taken from them.
No working box above falls below 40%, so the share stands; 70% of the link is an NVLink figure no PCIe box
reaches. Not found as published all_reduce tables: 8x H100 PCIe, 8x L40S, 4x A10G (g5.12xlarge: one socket,
its four GPUs on the root complex, aws/aws-ofi-nccl issue 466; the 8x A10G g5.48xlarge of NVIDIA/nccl issue
1298 is discussed as slow, its tables are attachments); their floor is this one."""


def floor_share(peak: LinkPeak) -> float:
    """PEAK_SHARE on an all-NVLink ring, PCIE_SHARE on one with a PCIe or host-staged hop."""
    return PEAK_SHARE if peak.kind == "nvlink" else PCIE_SHARE


SOURCES = ("nccl-tests", "torch")  # the curve a floor is judged on: nccl-tests' where it ran, else torch's
V = verdicts_for(STAGE)


def link_floor(facts: dict, check: str, expected: str) -> tuple[LinkPeak, float] | Verdict:
    """The link peak and its 70% floor, or the skip verdict `check` saying why there is none (the single-node
    peak verdicts and the intra-node ones alike)."""
    peak, why = link_peak_or_why(facts)
    if peak is None:
        return V.skip(
            check,
            expected=expected,
            observed=why,
            reason="no link peak to hold busbw to: the topology stage found no known GPU",
        )
    return peak, floor_share(peak) * peak.per_gpu_GBps


# ---------------------------------------------------------------- expectations


def inter_ceiling(facts: dict) -> tuple[float | None, str]:
    """The inter-node busbw ceiling, GB/s, and what sets it: min(link peak, NIC line rate × NICs per node of
    the slowest node); (None, why) when neither is known."""
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
    """Per node and collective: 0 wrong, and busbw ≥ 70% of the link peak where the peak is known; across
    nodes: busbw ≥ 70% of the inter-node ceiling (the stage's own floor for the plain cases on a multi-node
    run)."""
    names = node_names(profile)
    out: list[Expectation] = []
    peak, _ = link_peak_or_why(facts)
    for node in names:
        for coll in COLLECTIVES:
            case = intra_case(coll, node)
            out.append(
                Expectation(
                    stage=STAGE,
                    case=case,
                    metric="wrong",
                    value=0,
                    unit="count",
                    world=profile.nproc,
                    basis=f"every element equals its known expected value (node {node})",
                )
            )
            if peak is not None:
                out.append(
                    Expectation(
                        stage=STAGE,
                        case=case,
                        metric="busbw_min",
                        world=profile.nproc,
                        value=floor_share(peak) * peak.per_gpu_GBps,
                        unit="GB/s",
                        size_bytes=profile.sweep.max_bytes,
                        basis=f"intra-node: {floor_share(peak):.0%} × {peak.basis}",
                    )
                )
    return out


def inter_floors(profile: Profile, facts: dict) -> list[Expectation]:
    """The cross-node sweep's floor on a multi-node run (replacing the single-node link-peak floor)."""
    ceiling, basis = inter_ceiling(facts)
    if ceiling is None:
        return []
    return [
        Expectation(
            stage=STAGE,
            case=coll,
            metric="busbw_min",
            value=PEAK_SHARE * ceiling,
            unit="GB/s",
            basis=f"inter-node: {PEAK_SHARE:.0%} × {basis}",
            world=profile.world,
            size_bytes=profile.sweep.max_bytes,
        )
        for coll in COLLECTIVES
    ]


# ---------------------------------------------------------------- judge


def curves(rows: Sequence[Row], source: str) -> dict[str, dict[str, dict[int, float]]]:
    """node → collective → size → best busbw over placements, of one source's intra-node rows."""
    out: dict[str, dict[str, dict[int, float]]] = defaultdict(lambda: defaultdict(dict))
    for r in rows:
        split = split_case(r.case)
        if (
            split
            and split[0] in COLLECTIVES
            and r.source == source
            and r.metric == "busbw"
            and math.isfinite(r.value)
        ):
            curve = out[split[1]][split[0]]
            curve[r.size_bytes] = max(r.value, curve.get(r.size_bytes, -1.0))
    return {n: dict(c) for n, c in out.items()}


def chosen_curves(rows: Sequence[Row]) -> tuple[str, dict[str, dict[str, dict[int, float]]]]:
    for source in SOURCES:
        c = curves(rows, source)
        if c:
            return source, c
    return SOURCES[-1], {}


def judge(rows: list[Row], expectations: list[Expectation], facts: dict) -> list[Verdict]:
    """Nothing on one node; else every node swept and exact, the nccl-tests intra runs complete, and (on GPUs)
    every node's large-message busbw at its floor."""
    prof = profile_or_none(facts)
    nodes = node_names(prof) if prof else []
    if not nodes:
        if prof is not None and len(prof.nodes) > 1:
            return [
                V.skip(
                    "intra_sweep",
                    expected="an intra-node sweep on every node",
                    observed="1 rank per node",
                    reason="one rank per node has no link inside the node: run with --nproc 2 or more",
                )
            ]
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
    return V.check(
        "intra_sweep",
        not missing,
        expected=f"busbw rows for {', '.join(COLLECTIVES)} on every node",
        observed="; ".join(f"node {n}: missing {', '.join(cs)}" for n, cs in missing.items())
        or f"{len(nodes)} nodes × {len(COLLECTIVES)} collectives",
        reason_ok="every node swept every collective within itself",
        reason_bad="a node's intra-node sweep measured nothing for these: see "
        f"raw/{STAGE}/<node>/{LOG_NAME} and <node>/{TAG}.rank0.log",
    )


def judge_wrong(rows: Sequence[Row]) -> list[Verdict]:
    bad: dict[tuple[str, str], list[str]] = defaultdict(list)
    checked: set[tuple[str, str]] = set()
    for r in rows:
        split = split_case(r.case)
        if split and split[0] in COLLECTIVES and r.metric == "wrong" and r.source in SOURCES:
            checked.add((r.source, split[0]))
            if r.value != 0:
                bad[(r.source, split[0])].append(
                    f"node {split[1]} {r.size_bytes} B {r.placement}: {r.value:g}"
                )
    return [
        V.check(
            f"intra_wrong.{source}.{coll}",
            not bad.get((source, coll)),
            expected="0 wrong elements at every size on every node",
            observed="; ".join(bad.get((source, coll), [])[:6]) or "0",
            reason_ok="every node's results equal their expected values",
            reason_bad=f"{source} {coll} returned wrong values inside the node named: its GPUs, NVLink or "
            "driver — check that node's dmesg / nvidia-smi -q for errors",
        )
        for source, coll in sorted(checked)
    ]


def judge_nccl_tests(rows: Sequence[Row], facts: dict) -> list[Verdict]:
    """One verdict per collective over every node's nccl-tests status: complete everywhere, else the nodes
    named."""
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
        out.append(
            V.verdict(
                f"intra_nccl_tests.{coll}",
                worst,
                expected=f"{_nccl_tests.PROGRAMS[coll]} runs to its footer on every node (single-node form)",
                observed="; ".join(f"node {n}: {k}" for n, (k, _) in sorted(nodes.items())),
                reason="; ".join(short) or f"complete on {len(nodes)} nodes",
            )
        )
    return out


def judge_intra_peak(
    c: dict[str, dict[str, dict[int, float]]], source: str, nodes: Sequence[str], facts: dict
) -> list[Verdict]:
    floor_or_skip = link_floor(facts, "intra_peak", f"{PEAK_SHARE:.0%} of the link peak on every node")
    if isinstance(floor_or_skip, Verdict):
        return [floor_or_skip]
    peak, floor = floor_or_skip
    out = []
    for coll in COLLECTIVES:
        top = {n: (max(c[n][coll]), c[n][coll][max(c[n][coll])]) for n in nodes if c.get(n, {}).get(coll)}
        if not top:
            continue
        short = {n: v for n, v in top.items() if v[1] < floor}
        slowest = min(top, key=lambda n: top[n][1])
        out.append(
            V.check(
                f"intra_peak.{coll}",
                not short,
                bad="warn" if peak.staged else "fail",
                expected=f"busbw ≥ {floor:.1f} GB/s on every node ({floor_share(peak):.0%} × {peak.basis})",
                observed="; ".join(f"node {n}: {b:.1f} GB/s at {s} B" for n, (s, b) in sorted(short.items()))
                or f"slowest node {slowest}: {top[slowest][1]:.1f} GB/s ({source})",
                reason_ok="every node's GPUs reach their link",
                reason_bad=f"{coll} inside node(s) {', '.join(sorted(short))} stays below the link: that "
                f"node's "
                "`nvidia-smi topo -m` (a pair on PCIe/SYS), its fabric manager and NVLink state, "
                "NCCL_P2P_DISABLE there — the other nodes show what it should reach",
            )
        )
    return out


def judge_inter_peak(c: dict[str, dict[int, float]], source: str, facts: dict, rows=()) -> list[Verdict]:
    """The cross-node curves (bandwidth's own) against 70% of the inter-node ceiling, saying which ceiling;
    when NCCL's own log says it went over sockets (rows: suite/stages/_nccl_net.py), the miss says that."""
    from suite.stages._nccl_net import sockets_reason

    sockets = sockets_reason(rows)
    ceiling, basis = inter_ceiling(facts)
    if ceiling is None:
        return [
            V.skip(
                "inter_peak",
                expected=f"{PEAK_SHARE:.0%} of min(link peak, NICs × line rate)",
                observed=basis,
                reason="no ceiling to hold the cross-node sweep to: run topology first",
            )
        ]
    floor = PEAK_SHARE * ceiling
    out = []
    for coll, curve in sorted(c.items()):
        size = max(curve)
        out.append(
            V.check(
                f"inter_peak.{coll}",
                curve[size] >= floor,
                expected=f"busbw ≥ {floor:.1f} GB/s ({PEAK_SHARE:.0%} × {basis})",
                observed=f"{curve[size]:.1f} GB/s at {size} B across nodes ({source})",
                reason_ok="the collective across nodes reaches the inter-node ceiling",
                reason_bad=f"{coll} across nodes reaches {curve[size] / ceiling:.0%} of its ceiling, "
                f"{basis}: "
                + (
                    f"{sockets} — the fabric's RDMA was not measured"
                    if sockets
                    else "NCCL on TCP instead of IB/RoCE/EFA (NCCL_DEBUG=INFO says NET/Socket), GPUDirect "
                    "RDMA off, fewer "
                    "NICs in use than the node has (NCCL_IB_HCA), or a port trained down — the p2p matrix "
                    "names "
                    "the pair"
                ),
            )
        )
    return out


def floors_text(expectations: Sequence[Expectation]) -> str:
    """What the skipped performance verdicts would hold a multi-node run to: both floors, as computed."""
    intra = sorted(
        {round(e.value, 3) for e in expectations if e.metric == "busbw_min" and split_case(e.case)}
    )
    inter = [
        e
        for e in expectations
        if e.metric == "busbw_min" and e.case in COLLECTIVES and e.basis.startswith("inter-node")
    ]
    parts = [
        f"intra-node busbw ≥ {intra[0]:g} GB/s on every node"
        if intra
        else f"intra-node busbw ≥ {PEAK_SHARE:.0%} of the link peak on every node"
    ]
    parts.append(
        f"inter-node busbw ≥ {inter[0].value:.3g} GB/s ({inter[0].basis.removeprefix('inter-node: ')})"
        if inter
        else f"inter-node busbw ≥ {PEAK_SHARE:.0%} of min(link peak, NICs × line rate)"
    )
    return "; ".join(parts)


def headline_part(rows: Sequence[Row], expectations: Sequence[Expectation]) -> tuple[str, str] | None:
    """('intra 420 GB/s (slowest of 2 nodes: gpu-b)', '≥ 315'): the slowest node's all_reduce busbw at its
    largest size and the intra-node floor, for bandwidth's headline; None on a run without intra-node rows."""
    source, c = chosen_curves(rows)
    got = {n: per["all_reduce"][max(per["all_reduce"])] for n, per in c.items() if per.get("all_reduce")}
    if not got:
        return None
    slowest = min(got, key=got.get)
    floor = sorted({e.value for e in expectations if e.metric == "busbw_min" and split_case(e.case)})
    where = f"slowest of {len(got)} nodes: {slowest}" if len(got) > 1 else f"node {slowest}"
    return f"intra {got[slowest]:.4g} GB/s ({where})", (
        f"≥ {floor[0]:.4g}" if floor else "no link peak known"
    )
