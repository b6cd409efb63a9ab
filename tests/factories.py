"""What many tests build or look up by hand: a Verdict with only the fields the test cares about, and
verdicts by id."""

from __future__ import annotations

from suite.results import Verdict


def verdict(
    vid: str, status: str, *, expected: str = "e", observed: str = "o", reason: str = "why"
) -> Verdict:
    """A verdict of the stage its id starts with (`"tp.golden.tp2"` is tp's)."""
    return Verdict(
        id=vid, stage=vid.split(".", 1)[0], status=status, expected=expected, observed=observed, reason=reason
    )


def by_id(verdicts) -> dict[str, Verdict]:
    return {v.id: v for v in verdicts}
