"""The bandwidth stage across several nodes, one module for each of its phases: the point-to-point matrix
between every pair of nodes (node_pairs), every node's own sweep and fit (intra_node), their floors and
verdicts (intra_judges). On one node each function adds nothing, so the stage calls them unconditionally:

    seconds, parts = bandwidth_nodes.estimate(p)          # make plan: the matrix and the nodes' sweeps, and
                                                          # what
    out += bandwidth_nodes.expect(profile, facts)         # floors across nodes and each node's own
    rows += bandwidth_nodes.measure(ctx, sweep_args)      # the matrix, then every node's sweep at once
    rows, intra = bandwidth_nodes.with_fit(rows, form)    # each node's α-β fit (facts['alpha_beta_intra'])
    verdicts += bandwidth_nodes.judge(rows, expectations, facts)
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from suite.config import Profile
from suite.facts import profile_or_none
from suite.results import Expectation, Row, Verdict
from suite.stages.bandwidth import intra_judges, intra_node, node_pairs, transport_judge


def across(profile_or_facts: Profile | Mapping[str, Any]) -> bool:
    """Whether the run spans several nodes (a Profile, or the facts' profile)."""
    found = profile_or_facts if isinstance(profile_or_facts, Profile) else profile_or_none(profile_or_facts)
    return found is not None and len(found.nodes) > 1


def estimate(p) -> tuple[float, list[str]]:
    """make plan's seconds for the matrix and every node's own sweep (all nodes at once), and the plan's
    words."""
    pairs, intra = node_pairs.estimate_s(p), intra_node.estimate_s(p)
    words = (["the node-pair matrix"] if pairs else []) + (
        ["each node's intra-node sweep (all nodes at once)"] if intra else []
    )
    return pairs + intra, words


def expect(profile: Profile, facts: dict) -> list[Expectation]:
    """Across nodes the sweep is held to the NICs and each node's own sweep to its link; the matrix exact."""
    out = (
        intra_judges.inter_floors(profile, facts) + intra_judges.expect(profile, facts)
        if across(profile)
        else []
    )
    return out + node_pairs.expect(profile)


def measure(ctx, sweep_args: Sequence[str]) -> list[Row]:
    """The inter-node point-to-point matrix, then every node's own sweep (intra-node); nothing on one node."""
    if not across(ctx.profile):
        return []
    return node_pairs.measure(ctx) + intra_node.measure(ctx, sweep_args)


def with_fit(rows: list[Row], nccl_tests_form: str | None) -> tuple[list[Row], dict[str, Any]]:
    """Each node's own α-β fit added to the rows, and the slowest node's to publish."""
    return intra_node.with_fit(rows, nccl_tests_form)


def judge(rows: list[Row], expectations: list[Expectation], facts: dict) -> list[Verdict]:
    """The matrix's verdicts and every node's own floors."""
    return node_pairs.judge(rows, expectations, facts) + intra_judges.judge(rows, expectations, facts)


def floors_text(expectations: Sequence[Expectation]) -> str:
    return intra_judges.floors_text(expectations)


def judge_peak(curves: dict[str, dict[int, float]], source: str, facts: dict, rows=()) -> list[Verdict]:
    """The sweep across nodes at its best, held to the NICs (not the link), and the network NCCL used."""
    return intra_judges.judge_inter_peak(curves, source, facts, rows) + transport_judge.judge(rows, facts)


def headline_part(rows: Sequence[Row], expectations: Sequence[Expectation]) -> tuple[str, str] | None:
    return intra_judges.headline_part(rows, expectations)
