"""nccl-tests' table rows: the column layout a header line announces, and one data row read by it.

A long sweep is a million of these rows (~120 MB), so a layout is compiled once into the slice and converter
of every column and a row is one split and one pass over its tokens; the row's small strings (`float`, `sum`)
are interned, a sweep repeating them a million times."""

from __future__ import annotations

import re
import sys
from typing import Any, Callable

from suite.parsers.nccl_tests_fields import _int_or_float, _is_int

TIMESTAMP_TAIL = re.compile(r"\s+\d{4}-\d{2}-\d{2}\s+\d{2}:\d{2}:\d{2}\s*$")
TIME_NAMES = ("time", "cputime")
PARAM_ALIASES = {"bytes": "size", "N": "count", "op": "redop"}
WRONG_NAMES = {"#wrong": "count", "error": "max_deviation", "res": "max_deviation"}
EXTRA_NAMES = {"i_min": "i_min_us", "i_max": "i_max_us", "i_p99": "i_p99_us", "i_cv%": "i_cv_pct"}

# Column sets used when a capture holds rows but no header (a pasted table), by tokens per row.
HEADERLESS = {
    13: "size count type redop root time algbw busbw #wrong time algbw busbw #wrong",
    12: "size count type redop time algbw busbw error time algbw busbw error",
    11: "size count type time algbw busbw error time algbw busbw error",
}


def number(token: str) -> float | None:
    """A printed number; None for N/A, nan, inf, or anything that is not a number."""
    try:
        value = float(token)
    except ValueError:
        return None
    return value if value - value == 0 else None  # NaN and ±inf give NaN here


def _ms_to_us(token: str) -> float | None:
    value = number(token)
    return None if value is None else value * 1000


def _wrong(token: str) -> int | float | None:
    return _int_or_float(number(token))


FROM_FLOAT = {_ms_to_us: lambda value: value * 1000, _wrong: _int_or_float}
"""What a converter does once its token is known to be a finite float (the fast path in Table.row)."""


class Table:
    """The column layout announced by a header line, compiled into a converter per column."""

    def __init__(self, tokens: list[str], time_unit_s: float) -> None:
        tokens = [PARAM_ALIASES.get(t, t) for t in tokens]
        first_time = next(i for i, t in enumerate(tokens) if t in TIME_NAMES)
        self.params = tokens[:first_time]
        self.timestamp = tokens[-1] == "timestamp"
        perf = tokens[first_time:-1] if self.timestamp else tokens[first_time:]
        self.groups: list[list[str]] = []
        for t in perf:
            if t in TIME_NAMES:
                self.groups.append([])
            self.groups[-1].append(t)
        self.time_unit_s = time_unit_s
        wrong = [t for t in perf if t in WRONG_NAMES]
        self.wrong_kind = WRONG_NAMES[wrong[0]] if wrong else None
        self.width = sum(len(g) for g in self.groups)
        self.named = [n for n in self.params[3:] if n in ("redop", "root")]
        self.redop_then_root = self.named == ["redop", "root"]  # every table since 2022: the fast path
        self.halves = [self._half(group) for group in self.groups]
        # the table every nccl-tests since 2022 prints: read by one dict literal per half (measured: a
        # million rows in ~40 % less time than the general path below)
        self.modern = (
            self.params == ["size", "count", "type", "redop", "root"]
            and not self.timestamp
            and time_unit_s == 1e-6
            and [h[0] for h in self.halves] == [["time_us", "algbw", "busbw", "wrong"]] * 2
            and all(h[2] is None for h in self.halves)
        )

    def _half(self, group: list[str]) -> tuple:
        """(keys kept, every column's converter, the kept columns' positions or None for all, width, and what
        the fast path does to a column's float: (position, function) for ms times and #wrong counts)."""
        columns = [self._column(name) for name in group]
        kept = [i for i, (key, _) in enumerate(columns) if key is not None]
        after_float = [
            (i, FROM_FLOAT[convert]) for i, (_, convert) in enumerate(columns) if convert in FROM_FLOAT
        ]
        return (
            [columns[i][0] for i in kept],
            [convert for _, convert in columns],
            None if len(kept) == len(columns) else kept,
            len(columns),
            after_float,
        )

    def _column(self, name: str) -> tuple[str | None, Callable[[str], Any]]:
        """(the key in a half's dict, the token's converter); key None for a column the parse does not
        keep."""
        if name in TIME_NAMES:  # ms (2017 era) → µs; µs kept exactly as printed
            return "time_us", _ms_to_us if self.time_unit_s == 1e-3 else number
        if name in ("algbw", "busbw"):
            return name, number
        if name in WRONG_NAMES:
            return "wrong", _wrong
        return EXTRA_NAMES.get(name), number

    def row(self, line: str) -> dict[str, Any] | None:
        """One data row, read from the right (an empty redop field shifts nothing); None if cut off."""
        if self.modern:
            toks = line.split()
            if len(toks) == 13:
                row = modern_row(toks)
                if row is not None:
                    return row
        return self._row(line)

    def _row(self, line: str) -> dict[str, Any] | None:
        if self.timestamp:
            line = TIMESTAMP_TAIL.sub("", line)
        toks = line.split()
        split = len(toks) - self.width
        if split < 3:
            return None
        size, count = toks[0], toks[1]
        if not (size.isascii() and size.isdigit() and count.isascii() and count.isdigit()) or len(size) > 19:
            return None  # "-8", "1e400": no table row
        try:  # the common row: every figure a finite number, the whole tail converted at C speed at once
            numbers = list(map(float, toks[split:]))
            total = sum(numbers)
            fast = total - total == 0  # a nan or inf among them: the slow path says which
        except ValueError:
            fast = False
        halves = []
        at = split
        for keys, converters, kept, width, after_float in self.halves:
            if fast:
                values = numbers[at - split : at - split + width]
                for i, finish in after_float:
                    values[i] = finish(values[i])
            else:
                tokens = toks[at : at + width]
                values = [convert(token) for convert, token in zip(converters, tokens)]
                if values[0] is None and tokens[0].lower() != "nan":
                    return None  # a time that is no number: the row was cut
            halves.append(dict(zip(keys, values if kept is None else [values[i] for i in kept])))
            at += width
        row: dict[str, Any] = {
            "size": int(size),
            "count": int(count),
            "type": sys.intern(toks[2]),
            "redop": None,
            "root": None,
        }
        if split > 3:
            rest = toks[3:split]
            if self.redop_then_root and len(rest) == 2:
                row["redop"] = sys.intern(rest[0])
                root = rest[1]
                row["root"] = int(root) if _is_int(root) else sys.intern(root)
            elif not self._place_params(row, rest):
                return None
        row["oop"] = halves[0] if halves else None
        row["ip"] = halves[1] if len(halves) > 1 else None
        return row

    def _place_params(self, row: dict[str, Any], rest: list[str]) -> bool:
        names = self.named
        if len(rest) > len(names):
            return False
        if len(rest) == len(names):
            for name, tok in zip(names, rest):
                row[name] = int(tok) if name == "root" and _is_int(tok) else sys.intern(tok)
        else:  # a blank field (old alltoall's redop): place what is there by its look
            for tok in rest:
                if _is_int(tok) and "root" in names:
                    row["root"] = int(tok)
                elif "redop" in names:
                    row["redop"] = sys.intern(tok)
        return True


def modern_row(toks: list[str]) -> dict[str, Any] | None:
    """A row of `size count type redop root` and two halves of `time algbw busbw #wrong`, every figure a
    finite number, as Table._row reads it; None for any other row (the general path then reads it)."""
    size, count, root = toks[0], toks[1], toks[4]
    if not (size.isascii() and size.isdigit() and count.isascii() and count.isdigit()) or len(size) > 19:
        return None
    try:
        t1, a1, b1, w1, t2, a2, b2, w2 = map(float, toks[5:])
    except ValueError:
        return None
    total = t1 + a1 + b1 + w1 + t2 + a2 + b2 + w2
    if total - total != 0:  # a nan or inf among them
        return None
    return {
        "size": int(size),
        "count": int(count),
        "type": sys.intern(toks[2]),
        "redop": sys.intern(toks[3]),
        "root": int(root) if _is_int(root) else sys.intern(root),
        "oop": {"time_us": t1, "algbw": a1, "busbw": b1, "wrong": _int_or_float(w1)},
        "ip": {"time_us": t2, "algbw": a2, "busbw": b2, "wrong": _int_or_float(w2)},
    }


def headerless(width: int) -> Table | None:
    spec = HEADERLESS.get(width)
    return Table(spec.split(), 1e-6) if spec else None
