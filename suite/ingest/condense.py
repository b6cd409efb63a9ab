"""A very long nccl-tests table (a sweep looped for hours, or stepped with `-i` in small steps) → the real
rows the stages judge it by, so that `suite ingest` of a million-row capture costs about its parse, not hours.

A table of more than LIMIT rows is judged at up to SIZES of its sizes, spaced evenly in log size from its
smallest to its largest, plus each size where a row holds its best bus bandwidth and each size where a row
returned wrong values. At each of those sizes it keeps, per (type, redop, root), the rows with the best
out-of-place and in-place busbw (the judges' curves take the best per size anyway: suite/stages/bandwidth
`curves`) and the row with the most wrong elements. Every kept row is one the tool printed, unchanged; the
whole capture stays verbatim under raw/<stage>/. The choice of sizes depends on the sizes alone plus those
peak and wrong sizes, the same for all captures of a stage, so NCCL_ALGO=Ring and Tree twins keep the same
sizes and the crossover still pairs them.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass
from typing import Any

LIMIT = 4096
"""Rows in one table above which it is condensed: a `-b 8 -e 16G -f 2` sweep has 32, a fine `-i` sweep some
hundreds. 4,096 rows make ~33,000 tidy rows, judged and reported in a few seconds."""
SIZES = 1024
"""Sizes kept from a condensed table, spaced evenly in log size: 1,024 over 8 B..16 GiB are 2.1 % apart."""
WRONG_SIZES = 64
"""Sizes with wrong values kept beyond the spaced ones: the stage fails on the first; the note counts all."""
PLACEMENTS = ("oop", "ip")


@dataclass(frozen=True)
class Condensed:
    """What became of one table: the rows and sizes it had, those judged."""

    rows: int
    sizes: int
    kept_rows: int
    kept_sizes: int
    wrong_sizes: int

    def note(self) -> str:
        wrong = f", {self.wrong_sizes:,} with wrong values" if self.wrong_sizes else ""
        return (
            f"its {self.rows:,} rows at {self.sizes:,} sizes{wrong} judged by {self.kept_rows:,} of them at "
            f"{self.kept_sizes:,} sizes (spaced evenly in log size, plus the peak and wrong ones; each "
            f"size's best and most-wrong rows): the whole table is kept under raw/"
        )


def _busbw(half: dict[str, Any] | None) -> float:
    value = half.get("busbw") if half else None
    return value if isinstance(value, float | int) and math.isfinite(value) else -math.inf


def _wrong(row: dict[str, Any]) -> float:
    worst = 0.0
    for placement in PLACEMENTS:
        half = row.get(placement)
        value = half.get("wrong") if half else None
        if isinstance(value, float | int) and (value != 0 or math.isnan(value)):
            worst = max(worst, math.inf if math.isnan(value) else abs(value))
    return worst


def spaced(sizes: list[int], count: int) -> set[int]:
    """Up to `count` of the sorted distinct `sizes`, the nearest to points spaced evenly in log size from the
    smallest positive one to the largest; sizes of 0 bytes (nccl-tests prints them) are all kept."""
    positive = [s for s in sizes if s > 0]
    kept = {s for s in sizes if s <= 0}
    if len(positive) <= count:
        return kept | set(positive)
    low, high = math.log(positive[0]), math.log(positive[-1])
    for i in range(count):
        point = math.exp(low + (high - low) * i / (count - 1))
        at = bisect.bisect_left(positive, point)
        near = [positive[j] for j in (at - 1, at) if 0 <= j < len(positive)]
        kept.add(min(near, key=lambda s: abs(s - point)))
    return kept


def marked_sizes(tables: list[list[dict[str, Any]]]) -> tuple[set[int], set[int], set[int]]:
    """Over every table of a stage: all sizes, those where a table's busbw peaks (per placement), those with
    wrong values. One plain loop: it runs once per row of a million-row table."""
    sizes: set[int] = set()
    peaks: set[int] = set()
    wrong: set[int] = set()
    for rows in tables:
        best = {p: [-math.inf, None] for p in PLACEMENTS}
        for r in rows:
            size = r["size"]
            sizes.add(size)
            for p in PLACEMENTS:
                half = r.get(p)
                if not half:
                    continue
                value = half.get("busbw")
                if value is not None and value > best[p][0] and math.isfinite(value):
                    best[p] = [value, size]
                if half.get("wrong"):  # a count other than 0, or NaN
                    wrong.add(size)
        peaks |= {size for _, size in best.values() if size is not None}
    return sizes, peaks, wrong


def kept_rows(rows: list[dict[str, Any]], sizes: set[int]) -> list[dict[str, Any]]:
    """At each size of `sizes`, per (type, redop, root): the rows with the best busbw per placement and the
    most wrong one, in the table's order."""
    chosen: dict[tuple, tuple[float, int]] = {}
    for i, r in enumerate(rows):
        if r["size"] not in sizes:
            continue
        key = (r["size"], r.get("type"), r.get("redop"), r.get("root"))
        for p in PLACEMENTS:
            value = _busbw(r.get(p))
            if (key, p) not in chosen or value > chosen[(key, p)][0]:
                chosen[(key, p)] = (value, i)
        worst = _wrong(r)
        if worst and ((key, "wrong") not in chosen or worst > chosen[(key, "wrong")][0]):
            chosen[(key, "wrong")] = (worst, i)
    return [rows[i] for i in sorted({i for _, i in chosen.values()})]


def stage_tables(datas: list[dict[str, Any]]) -> list[tuple[dict[str, Any], Condensed | None]]:
    """Each parsed nccl-tests run of one stage, condensed when one of them is longer than LIMIT rows (all by
    the same sizes); an unchanged run's Condensed is None."""
    if all(len(d["rows"]) <= LIMIT for d in datas):
        return [(d, None) for d in datas]
    sizes, peaks, wrong = marked_sizes([d["rows"] for d in datas])
    ordered = sorted(sizes)
    keep = spaced(ordered, SIZES) | peaks | set(sorted(wrong)[:WRONG_SIZES])
    out = []
    for d in datas:
        if len(d["rows"]) <= LIMIT:
            out.append((d, None))
            continue
        rows = kept_rows(d["rows"], keep)
        own_sizes = {r["size"] for r in d["rows"]}
        out.append(
            (
                {**d, "rows": rows},
                Condensed(
                    rows=len(d["rows"]),
                    sizes=len(own_sizes),
                    kept_rows=len(rows),
                    kept_sizes=len({r["size"] for r in rows}),
                    wrong_sizes=len(wrong & own_sizes),
                ),
            )
        )
    return out
