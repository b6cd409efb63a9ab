"""The pieces a stage's `headline()` is written with: the one line the report's first screen shows for it.

A stage module may declare (docs/stages.md)

    def headline(rows: list[Row], verdicts: list[Verdict], expectations: list[Expectation]) -> str | None

returning its headline figure measured against what was expected, in a few words:
"all_reduce busbw 362 GB/s at 8 GiB · expected ≥ 315", "TP=4 speedup 3.1× · ideal 4×". None (or no
function) gives the report's generic line, made from the stage's most severe verdict.

    best = last(rows, "train_step", "speedup", key="tp")
    return f"TP={best.tp} speedup {times(best.value)}" if best else None
"""

from __future__ import annotations

import math
from typing import Iterable

from suite.results import Expectation, Row, Verdict
from suite.values import is_finite_number

Measured = Row | Expectation


def matching(records: Iterable[Measured], case: str, metric: str, **params) -> list[Measured]:
    """The rows (or expectations) of one case and metric whose named parameters equal the given values, finite
    only."""
    return [
        r
        for r in records
        if r.case == case
        and r.metric == metric
        and is_finite_number(r.value)
        and all(getattr(r, k) == v for k, v in params.items())
    ]


def last(records: Iterable[Measured], case: str, metric: str, key: str, **params) -> Measured | None:
    """The row with the largest `key` parameter (the largest size, the highest degree), or None."""
    found = [r for r in matching(records, case, metric, **params) if getattr(r, key) is not None]
    return max(found, key=lambda r: getattr(r, key)) if found else None


def verdict(verdicts: Iterable[Verdict], verdict_id: str) -> Verdict | None:
    return next((v for v in verdicts if v.id == verdict_id), None)


def size(n: float | int | None) -> str:
    """Binary units as the sweeps use them: 8 B, 4 KiB, 4 MiB, 8 GiB (exact powers stay exact)."""
    if n is None:
        return ""
    n = int(n)
    for unit, scale in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if abs(n) >= scale:
            q = n / scale
            return f"{q:g} {unit}" if q == int(q) else f"{q:.3g} {unit}"
    return f"{n} B"


def seconds(s: float) -> str:
    """A duration in the unit a person reads it in: 850 µs, 12.3 ms, 4.2 s, 3.5 min."""
    if not math.isfinite(s):
        return "?"
    if s < 1e-3:
        return f"{s * 1e6:.3g} µs"
    if s < 1:
        return f"{s * 1e3:.3g} ms"
    if s < 120:
        return f"{s:.3g} s"
    return f"{s / 60:.3g} min"


def times(x: float) -> str:
    return f"{x:.3g}×"


def number(x: float) -> str:
    return f"{x:.4g}" if abs(x) < 1e4 else f"{x:.0f}"


def median(values: Iterable[float]) -> float:
    values = sorted(values)
    if not values:
        return math.nan
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2


def passed(verdicts: Iterable[Verdict], prefix: str) -> str:
    """'5 of 5' judged verdicts whose id starts with prefix passed ('' when none was judged)."""
    judged = [v for v in verdicts if v.id.startswith(prefix) and v.status != "skip"]
    return f"{sum(v.status == 'pass' for v in judged)} of {len(judged)}" if judged else ""


def judged(verdicts: Iterable[Verdict], prefix: str) -> bool:
    """Whether any verdict whose id starts with prefix was judged (not skipped: a CPU run skips
    performance)."""
    return any(v.id.startswith(prefix) and v.status != "skip" for v in verdicts)


def worst_ratio(rows: Iterable[Row], expectations: Iterable[Expectation], metric: str, *keys: str) -> float:
    """max over rows of value / the expectation of the same case and `keys` parameters (a golden error over
    its tolerance: below 1 is within it); nan when no row has an expectation."""
    limits = {
        (e.case, *(getattr(e, k) for k in keys)): e.value
        for e in expectations
        if e.metric == metric and is_finite_number(e.value) and e.value > 0
    }
    ratios = [
        r.value / limits[(r.case, *(getattr(r, k) for k in keys))]
        for r in rows
        if r.metric == metric
        and is_finite_number(r.value)
        and (r.case, *(getattr(r, k) for k in keys)) in limits
    ]
    return max(ratios) if ratios else math.nan
