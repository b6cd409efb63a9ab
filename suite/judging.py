"""Small helpers every stage's judge() uses, so verdicts read alike across stages."""

from __future__ import annotations

from typing import Any

from .results import Verdict

CPU_SAYS_NOTHING = "CPU numbers say nothing about GPUs"


def judges_performance(facts: dict[str, Any]) -> bool:
    """Whether performance verdicts are real (a GPU profile) or skipped (the CPU rehearsal)."""
    return bool(facts.get("profile", {}).get("judge_performance", False))


def performance_skip(stage: str, check: str, expected: str, observed: str = "") -> Verdict:
    """The verdict a performance check gets on the CPU rehearsal."""
    return Verdict(id=f"{stage}.{check}", stage=stage, status="skip", expected=expected,
                   observed=observed or "measured on CPU", reason=CPU_SAYS_NOTHING)


def verdict(stage: str, check: str, ok: bool, *, expected: str, observed: str, reason_ok: str, reason_bad: str,
            bad: str = "fail") -> Verdict:
    """pass with reason_ok when ok, else `bad` (fail or warn) with reason_bad."""
    return Verdict(id=f"{stage}.{check}", stage=stage, status="pass" if ok else bad,
                   expected=expected, observed=observed, reason=reason_ok if ok else reason_bad)


def not_captured(facts: dict[str, Any], source: str) -> bool:
    """Whether this run was built by `suite ingest` from captures holding no `source` output (its checks skip)."""
    ingest = facts.get("ingest")
    return isinstance(ingest, dict) and source not in ingest.get("sources", ())


def not_captured_skip(stage: str, check: str, expected: str, what: str) -> Verdict:
    return Verdict(id=f"{stage}.{check}", stage=stage, status="skip", expected=expected,
                   observed=f"no {what} among the ingested files",
                   reason=f"this run was ingested from captured outputs (manifest: ingested) and they hold no {what}")
