"""The first screen's answer: one line per stage (status, headline figure, link) and the failures to act on.

A stage's headline comes from its module's optional `headline(rows, verdicts, expectations)` (see
suite/headlines.py); a stage that declares none, or whose function raises or returns nothing, gets
the generic line: its most severe judged verdict's observed value against the expected one, or how
many checks were skipped and why.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from reports import fmt
from suite import stages as suite_stages
from suite.box_verdict import leaves_open
from suite.results import Verdict, expectation_from_dict, row_from_dict
from suite.verdicts import SEVERITY_RANK

MAX_HEADLINE = 140
"""Characters of a headline kept on the first screen (the full verdict is in the stage's section)."""
MAX_REASON = 220


@dataclass(frozen=True)
class Skipped:
    id: str
    reason: str


@dataclass(frozen=True)
class StageLine:
    stage: str
    anchor: str
    status: str
    """The stage's most severe verdict status; "none" when it has no verdict (it did not run)."""
    headline: str
    counts: str
    """'3 pass · 1 warn' over the judged verdicts; skips are in skip_line."""
    skip_line: str
    """'7 skipped', or '' without skips; skip_why says why (the most common reason)."""
    skip_why: str = ""
    skipped: list[Skipped] = field(default_factory=list)
    cpu_figure: str = ""
    """A rehearsal's own headline figure (a CPU's speed, which says nothing of a GPU), shown greyed after what
    the stage proved; '' elsewhere."""


@dataclass(frozen=True)
class Attention:
    """A failure or warning on the first screen: where, what was seen against what was expected, what to
    do."""

    stage: str
    anchor: str
    status: str
    check: str
    seen: str
    reason: str


def clip(text: str, limit: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def check_name(v: Verdict) -> str:
    """The verdict id without its stage prefix: 'peak.all_reduce'."""
    prefix = v.stage + "."
    return v.id[len(prefix) :] if v.id.startswith(prefix) else v.id


def worst_status(verdicts: list[Verdict]) -> str:
    return min((v.status for v in verdicts), key=SEVERITY_RANK.__getitem__) if verdicts else "none"


def generic_headline(verdicts: list[Verdict], state: str) -> str:
    """The most severe judged verdict, 'check: observed · expected …'; else why nothing was judged."""
    judged = sorted((v for v in verdicts if v.status != "skip"), key=lambda v: SEVERITY_RANK[v.status])
    if judged:
        v = judged[0]
        return f"{check_name(v)}: {fmt.first_line(v.observed)} · expected {fmt.first_line(v.expected)}"
    if verdicts:
        return "nothing judged on this run (every check skipped)"
    return state or "no verdicts recorded"


def declared_headline(stage: str, rows, verdicts: list[Verdict], expectations) -> str | None:
    """The stage's own headline, or None (no such stage, none declared, it raised, it returned nothing)."""
    declared = suite_stages.REGISTRY.declared.get(stage)
    make = declared.headline if declared else None
    if make is None:
        return None
    try:
        text = make(
            [row_from_dict(r) for r in rows.to_dict("records")],
            verdicts,
            [expectation_from_dict(e) for e in expectations.to_dict("records")],
        )
    # a broken headline falls back to the generic line, never a failed report
    except Exception:  # noqa: BLE001
        return None
    return str(text) if text else None


# Checks that compare a partitioned computation with one process, or bits with bits: what a rehearsal proves.
PROOF_WORDS = ("golden", "correct", "wrong", "sdc", "grads", "equal", "bytes", "resume", "loss", "state")


def proven_headline(verdicts: list[Verdict]) -> str:
    """A rehearsal's line: the passed check that best shows what was proven on CPU (an equality with one
    process, bits equal), with its observation; or that every check waits for a GPU."""
    passed = [v for v in verdicts if v.status == "pass"]
    if not passed:
        return "nothing to prove on CPU: every check here needs a GPU"
    proofs = [v for v in passed if any(w in check_name(v) for w in PROOF_WORDS)]
    best = (proofs or passed)[-1]  # the last of a kind is its hardest case: the largest world, ZeRO-3
    return f"proven on CPU: {check_name(best)}: {fmt.first_line(best.observed)}"


def skip_summary(skips: list[Verdict]) -> tuple[str, str]:
    """('7 skipped', 'CPU numbers say nothing about GPUs'): the most common reason, '+ n more' when they
    differ."""
    if not skips:
        return "", ""
    reasons = Counter(fmt.first_line(v.reason) for v in skips)
    reason, n = reasons.most_common(1)[0]
    more = "" if n == len(skips) else f" (+{len(reasons) - 1} other reason{'s' if len(reasons) > 2 else ''})"
    return f"{len(skips)} skipped", clip(reason, 70) + more


def stage_line(
    stage: str,
    anchor: str,
    rows,
    expectations,
    verdicts: list[Verdict],
    state: str,
    judges_box: bool = False,
    rehearsal: bool = False,
) -> StageLine:
    """judges_box: a run that judges a box (not the rehearsal), where a stage whose checks passed but left one
    open is badged "open", never a green pass. rehearsal: a CPU rehearsal, whose line says what was proven."""
    judged = Counter(v.status for v in verdicts if v.status != "skip")
    skips = [v for v in verdicts if v.status == "skip"]
    counts = " · ".join(f"{judged[s]} {s}" for s in ("fail", "warn", "pass") if judged[s])
    own = declared_headline(stage, rows, verdicts, expectations)
    status = worst_status(verdicts)
    # a rehearsal's figures are a CPU's: its line says what the stage proved, the figure follows greyed
    proving = rehearsal and status in ("pass", "skip")
    text = proven_headline(verdicts) if proving else own or generic_headline(verdicts, state)
    skip_line, skip_why = skip_summary(skips)
    if judges_box and status in ("pass", "skip") and any(leaves_open(v) for v in verdicts):
        status = "open"
    return StageLine(
        stage=stage,
        anchor=anchor,
        status=status,
        headline=clip(text, MAX_HEADLINE),
        counts=counts,
        skip_line=skip_line,
        skip_why=skip_why,
        skipped=[Skipped(v.id, clip(fmt.first_line(v.reason), MAX_REASON)) for v in skips],
        # unless the figure is the proof itself (topology's CPU line)
        cpu_figure=clip(own, MAX_HEADLINE)
        if proving and own and own.casefold() not in text.casefold()
        else "",
    )


def attention(verdicts: list[Verdict], anchor_of, order: list[str]) -> list[Attention]:
    """Failures, then warnings, stages in run order: each with what was seen and its one-line reason."""
    position = {name: i for i, name in enumerate(order)}
    picked = sorted(
        (v for v in verdicts if v.status in ("fail", "warn")),
        key=lambda v: (SEVERITY_RANK[v.status], position.get(v.stage, len(order)), v.id),
    )
    return [
        Attention(
            stage=v.stage,
            anchor=anchor_of(v.stage),
            status=v.status,
            check=check_name(v),
            seen=clip(f"{fmt.first_line(v.observed)} (expected {fmt.first_line(v.expected)})", MAX_HEADLINE),
            reason=clip(fmt.first_line(v.reason), MAX_REASON),
        )
        for v in picked
    ]
