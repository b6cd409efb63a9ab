"""The bandwidth stage's inter-node part: the point-to-point matrix between every ordered pair of nodes
(suite/stages/bandwidth/node_pairs_worker.py), its expectations and its verdicts. Only a multi-node profile
has it. Not a stage: the underscore keeps it out of discovery.
"""

from __future__ import annotations

import math
import statistics

from suite.cluster.multinode import arrow, parse_nodes
from suite.config import Profile
from suite.launch.rows import launch_rows
from suite.results import Expectation, Row, Verdict
from suite.verdicts import judges_performance, verdicts_for

STAGE = "bandwidth"
PAIR_BYTES = 4 << 20  # 4 MiB per transfer: past the latency-bound sizes on a 100–400 Gb/s NIC
PAIR_ITERS = 5
SLOW_SHARE = 0.7  # a pair below 70% of the median pair is named slow
LINE_SHARE = (
    0.7  # a pair below 70% of its NICs' line rate fails (the bandwidth stage's floor against a link peak)
)
V = verdicts_for(STAGE)


def pairs(profile: Profile) -> list[str]:
    names = [n.name for n in parse_nodes(profile.nodes)] if len(profile.nodes) > 1 else []
    return [arrow(a, b) for a in names for b in names if a != b]


def estimate_s(p) -> float:
    """`make plan`'s seconds for the matrix (p: suite.plan.hours.PlanInputs): one launch, then every ordered
    pair's warm-up and timed transfers one after another over one NIC; 0 on one node."""
    n = p.assume.nodes
    if n < 2:
        return 0.0
    return p.assume.torchrun_launch_s + n * (n - 1) * (1 + PAIR_ITERS) * (
        p.alpha_s + PAIR_BYTES / p.assume.inter_node_Bps
    )


def expect(profile: Profile) -> list[Expectation]:
    return [
        Expectation(
            stage=STAGE,
            case=case,
            metric="wrong",
            value=0,
            unit="count",
            source="p2p",
            world=2,
            basis="every element received equals the pattern its sender filled",
        )
        for case in pairs(profile)
    ]


def measure(ctx) -> list[Row]:
    ctx.say(f"point-to-point between every pair of {len(ctx.profile.nodes)} nodes")
    return launch_rows(
        ctx,
        "suite.stages.bandwidth.node_pairs_worker",
        ["--bytes", str(PAIR_BYTES), "--iters", str(PAIR_ITERS)],
        tag="pairs",
    )


def judge(rows: list[Row], expectations: list[Expectation], facts: dict) -> list[Verdict]:
    """Nothing on one node; else every pair measured and exact, and (on GPUs) no pair far below the others."""
    wanted = [e.case for e in expectations if e.source == "p2p" and e.metric == "wrong"]
    if not wanted:
        return []
    got = {(r.case, r.metric): r.value for r in rows if r.source == "p2p"}
    missing = [c for c in wanted if (c, "busbw") not in got or (c, "wrong") not in got]
    out = [
        V.check(
            "p2p_pairs",
            not missing,
            expected=f"{len(wanted)} node pairs measured",
            observed=f"missing {', '.join(missing)}" if missing else f"{len(wanted)} pairs",
            reason_ok="send/recv ran between every ordered pair of nodes",
            reason_bad="a pair was not measured: see raw/bandwidth/<node>/pairs.torchrun.log of both nodes",
        )
    ]
    wrong = {c: got[(c, "wrong")] for c in wanted if (c, "wrong") in got and got[(c, "wrong")] != 0}
    out.append(
        V.check(
            "p2p_wrong",
            not wrong,
            expected="0 wrong elements on every pair",
            observed=", ".join(f"{c}: {v:.0f}" for c, v in wrong.items()) or "0 on every pair",
            reason_ok="every element arrived as sent",
            reason_bad="data was corrupted between these nodes: check the NICs and cables of the pair",
        )
    )
    speeds = {c: got[(c, "busbw")] for c in wanted if math.isfinite(got.get((c, "busbw"), math.nan))}
    if not judges_performance(facts):
        return out + [
            V.cpu_skip("p2p_line_rate", f"every pair ≥ {LINE_SHARE:.0%} of its NIC line rate"),
            V.cpu_skip("p2p_slow_pair", f"every pair ≥ {SLOW_SHARE:.0%} of the median pair"),
        ]
    if speeds:
        out.append(line_rate_verdict(speeds, facts.get("node_line_gbps") or {}))
    if len(speeds) < 2:
        return out + [
            V.skip(
                "p2p_slow_pair",
                expected="2 or more pairs",
                observed=f"{len(speeds)} pair(s)",
                reason="one pair has nothing to be compared with",
            )
        ]
    median = statistics.median(speeds.values())
    slow = {c: v for c, v in speeds.items() if v < SLOW_SHARE * median}
    out.append(
        V.check(
            "p2p_slow_pair",
            not slow,
            expected=f"every pair ≥ {SLOW_SHARE:.0%} of the median {median:.1f} GB/s",
            observed=", ".join(f"{c}: {v:.1f} GB/s" for c, v in slow.items())
            or f"slowest {min(speeds.values()):.1f} GB/s",
            reason_ok="no node pair stands out",
            bad="warn",
            reason_bad="these pairs are slow: the node both share is the suspect (its NIC's rate and "
            "port state in `ibstat`, its cable, its switch port)",
        )
    )
    return out


def line_rate_verdict(speeds: dict[str, float], line_gbps: dict[str, float]) -> Verdict:
    """Every pair at LINE_SHARE of its line: one rank per node sends, through one NIC, so the ceiling is the
    slower of the two nodes' fastest up port (topology's node_line_gbps, Gb/s; busbw here is GB/s)."""
    lines = {
        c: min(line_gbps.get(a, 0.0), line_gbps.get(b, 0.0)) / 8 for c in speeds for a, b in [c.split("→", 1)]
    }
    known = {c: v for c, v in lines.items() if v > 0}
    if not known:
        return V.skip(
            "p2p_line_rate",
            expected=f"every pair ≥ {LINE_SHARE:.0%} of its NIC line rate",
            observed="no NIC rate known",
            reason="topology found no up port with a rate on these nodes (see topology.nics)",
        )
    short = {c: speeds[c] for c in known if speeds[c] < LINE_SHARE * known[c]}
    return V.check(
        "p2p_line_rate",
        not short,
        expected=f"every pair ≥ {LINE_SHARE:.0%} of the slower node's NIC "
        "line rate (" + ", ".join(f"{c} {v:.1f} GB/s" for c, v in known.items()) + ")",
        observed=", ".join(f"{c}: {v:.1f} GB/s" for c, v in short.items())
        or f"slowest {min(speeds[c] / known[c] for c in known):.0%} of its line",
        reason_ok="every node pair runs near its NICs' line rate",
        reason_bad="these pairs run far below their NICs: GPUDirect RDMA off (NCCL_NET_GDR_LEVEL, "
        "nvidia-peermem), NCCL on TCP instead of IB (NCCL_DEBUG=INFO says NET/Socket), or a "
        "port negotiated below its rate",
    )
