"""The values of a trace's events and an nsys export's kernel rows, checked as they are read: JSON and SQLite
hold any value anywhere, and a string, a list or an infinite number where a time is would otherwise end in a
TypeError deep in the timeline's arithmetic."""

from __future__ import annotations

import math
from typing import Any

from suite.parsers import ParseError


def event_problem(event: Any) -> str | None:
    """What makes a trace event one no profiler writes, in words; None for a well-formed event."""
    if not isinstance(event, dict):
        return f"{type(event).__name__} {str(event)[:40]!r} where an event object belongs"
    for key in ("ts", "dur"):
        value = event.get(key, 0)
        if not (isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)):
            return f"{key} is {str(value)[:40]!r}, not a finite number of microseconds"
    for key in ("pid", "tid"):
        value = event.get(key, 0)
        if not isinstance(value, (int, str)) or isinstance(value, bool):
            return f"{key} is {str(value)[:40]!r}, not a process or thread id"
    for key in ("name", "cat", "ph"):
        if not isinstance(event.get(key, ""), str):
            return f"{key} is {str(event[key])[:40]!r}, not text"
    return None


def check_kernel_row(index: int, start: Any, end: Any, dev: Any, names: list) -> None:
    """SQLite keeps any value in any column: a kernel row nsys could not have written is one ParseError."""

    def time_ok(v: Any) -> bool:
        return v is None or isinstance(v, int) or isinstance(v, float) and math.isfinite(v)

    bad = next(((col, v) for col, v in (("start", start), ("end", end)) if not time_ok(v)), None)
    if bad is None and not (dev is None or isinstance(dev, int)):
        bad = ("deviceId", dev)
    if bad is None:
        bad = next((("name", n) for n in names if not (n is None or isinstance(n, (int, str)))), None)
    if bad:
        raise ParseError(
            f"CUPTI_ACTIVITY_KIND_KERNEL row {index + 1}: {bad[0]} is {str(bad[1])[:40]!r}, "
            "not what nsys writes there: the export is damaged"
        )
