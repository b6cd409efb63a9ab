"""Numbers, sizes, times and durations as the report prints them (strings; the template does no
formatting)."""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any

from suite import headlines
from suite.values import is_missing


def number(value: Any, digits: int = 4) -> str:
    """4 significant digits below 10⁴, whole numbers above, an exponent only for the tiny: 12.35, 123457,
    4.321e-05."""
    if is_missing(value):
        return ""
    if isinstance(value, (int,)) and not isinstance(value, bool):
        return str(value)
    try:
        x = float(value)
    except (TypeError, ValueError):
        return str(value)
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "∞" if x > 0 else "−∞"
    if x == int(x) and abs(x) < 1e15:
        return str(int(x))
    if 1e4 <= abs(x) < 1e15:
        return f"{x:.0f}"
    if 1e-4 <= abs(x):
        return f"{x:.{digits}g}"
    return f"{x:.{digits - 1}e}"


def size_bytes(value: Any) -> str:
    """Binary units as the sweeps use them: 8 B, 4 KiB, 4 MiB, 8 GiB (exact powers stay exact)."""
    return "" if is_missing(value) else headlines.size(value)


def cell(column: str, value: Any) -> str:
    """One table cell: sizes in binary units, numbers at 4 significant digits, text as is."""
    if is_missing(value):
        return ""
    if column == "size_bytes":
        return size_bytes(value)
    if column == "value" or isinstance(value, float):
        return number(value)
    return str(value)


def parse_time(text: Any) -> datetime | None:
    if not text:
        return None
    try:
        return datetime.fromisoformat(str(text))
    except ValueError:
        return None


def duration(seconds: float | None) -> str:
    """1 h 02 min, 3 min 07 s, 42 s."""
    if seconds is None or seconds < 0:
        return ""
    s = round(seconds)
    if s >= 3600:
        return f"{s // 3600} h {s % 3600 // 60:02d} min"
    if s >= 60:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s} s"


def span(start: Any, end: Any) -> str:
    """'2026-11-29T16:30:00+00:00 → 16:42:10 (12 min 10 s)'; an unfinished span says so."""
    t0, t1 = parse_time(start), parse_time(end)
    if t0 is None:
        return "not started"
    if t1 is None:
        return f"{t0.isoformat()} → not finished"
    same_day = t0.date() == t1.date()
    end_text = t1.strftime("%H:%M:%S") if same_day else t1.isoformat()
    return f"{t0.isoformat()} → {end_text} ({duration((t1 - t0).total_seconds())})"


def first_line(text: str) -> str:
    lines = [line for line in str(text).splitlines() if line.strip()]
    return lines[0] if lines else ""


def file_size(n: int) -> str:
    if n >= 1024**2:
        return f"{n / 1024**2:.1f} MiB"
    if n >= 1024:
        return f"{n / 1024:.1f} KiB"
    return f"{n} B"
