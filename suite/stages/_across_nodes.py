"""What dp and zero say about their degrees on a multi-node profile (a library the two share): which crossed
nodes, which α-β each is held to.

    held = held_to(facts, profile, [1, 2, 4])   # "1–2 ranks within node 0: β = 2 GB/s (no intra-node fit: …);
                                                #  4 ranks across 2 nodes: β = 1.2 GB/s (… the inter-node fit
                                                   …)"

Ranks are node-major (torchrun numbers node g's ranks g·nproc …), so degree d is ranks 0…d−1: within node 0 up
to nproc, then ⌈d / nproc⌉ whole nodes. The workers record which nodes each degree's ranks were really on
(suite/workloads/node_ranks.py), and nodes_verdict holds that to the plan.
"""

from __future__ import annotations

from suite.config import Profile
from suite.costmodel.alphabeta import nodes_spanned
from suite.facts import AlphaBeta, alpha_beta_at
from suite.results import Row, Verdict
from suite.verdicts import verdicts_for
from suite.workloads.node_ranks import NODES_METRIC

NETWORK_HINT = (
    "the network (the bandwidth stage's node pairs, NCCL_SOCKET_IFNAME/NCCL_IB_HCA picking the fast NICs)"
)
"""Where to look when a degree spanning nodes is slower than the inter-node β explains (dp's and zero's
verdicts)."""


def place(profile: Profile, degree: int) -> str:
    """'within node 0', 'across 2 nodes'; '' on a single-node profile (nothing to say)."""
    if len(profile.nodes) <= 1:
        return ""
    return (
        "within node 0" if degree <= profile.nproc else f"across {nodes_spanned(degree, profile.nproc)} nodes"
    )


def ranks_label(profile: Profile, degree: int) -> str:
    """'4 ranks across 2 nodes', '2 ranks' (a single-node profile), as the verdicts name a degree."""
    where = place(profile, degree)
    return f"{degree} ranks" + (f" {where}" if where and degree > profile.nproc else "")


def held_to(facts: dict, profile: Profile, degrees) -> str:
    """Which α-β the degrees were held to, grouped within node 0 / across nodes; '' on a single-node
    profile."""
    if len(profile.nodes) <= 1:
        return ""
    parts = []
    within = [d for d in degrees if d <= profile.nproc]
    if within:
        ab = alpha_beta_at(facts, profile, within[0])
        span = f"{within[0]}" if len(within) == 1 else f"{within[0]}–{within[-1]}"
        parts.append(f"{span} ranks within node 0 held to the intra-node β = {_rate(ab)} ({ab.source})")
    for d in (d for d in degrees if d > profile.nproc):
        ab = alpha_beta_at(facts, profile, d)
        parts.append(f"{ranks_label(profile, d)} held to the inter-node β = {_rate(ab)} ({ab.source})")
    return "; ".join(parts)


def _rate(ab: AlphaBeta) -> str:
    return f"{ab.beta_Bps / 1e9:.3g} GB/s"


def nodes_verdict(stage: str, rows: list[Row], profile: Profile) -> list[Verdict]:
    """On a multi-node profile: each degree ran on the nodes the model assumed (node 0 alone up to nproc, then
    ⌈d/nproc⌉ nodes); [] on one node."""
    if len(profile.nodes) <= 1:
        return []
    verdicts = verdicts_for(stage)
    found = {r.world: r for r in rows if r.metric == NODES_METRIC}
    expected = (
        f"degrees up to {profile.nproc} on node 0 alone, each larger one on ⌈d/{profile.nproc}⌉ nodes "
        f"(ranks node-major)"
    )
    if not found:
        return [
            verdicts.skip(
                "nodes",
                expected=expected,
                observed="no node rows",
                reason=f"the workers recorded no node names: see raw/{stage}/<node>/*.log",
            )
        ]
    observed = ", ".join(f"{d} ranks on {r.text or '?'}" for d, r in sorted(found.items()))
    wrong = [d for d, r in sorted(found.items()) if r.value != nodes_spanned(d, profile.nproc)]
    return [
        verdicts.check(
            "nodes",
            not wrong,
            bad="warn",
            expected=expected,
            observed=observed,
            reason_ok="every degree ran where its α-β assumed: within node 0, or across whole nodes",
            reason_bad=f"{', '.join(map(str, wrong))} ranks ran on other nodes than assumed, so their "
            f"predictions used "
            f"the wrong β: the launcher did not number ranks node by node (check torchrun's "
            f"--nproc-per-node on every node)",
        )
    ]
