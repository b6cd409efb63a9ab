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

from .results import Expectation, Row, Verdict
from .values import is_finite_number

Measured = Row | Expectation


def matching(records: Iterable[Measured], case: str, metric: str, **params) -> list[Measured]:
    """The rows (or expectations) of one case and metric whose named parameters equal the given values, finite only."""
    return [r for r in records if r.case == case and r.metric == metric and is_finite_number(r.value)
            and all(getattr(r, k) == v for k, v in params.items())]


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
