"""Where a run stands among the other boxes of its GPU model in the library.

    for line in placement(db, summary): print(line)
    # "all_reduce busbw 452.0 GB/s: percentile 85 among 19 other H100 SXM runs (median 441.0)"
    # "nearest other box: 20261102T0930Z… (2026-11-02, ACCEPT), figures within 2 % on average"
    # "cost per measured bf16 PFLOP-hour: $4.21 ($23.92/h ÷ 5.68 PFLOP/s); median of the others $4.60"

Higher is better for every figure but α and the baseline's step time (LOWER_IS_BETTER), so a percentile
always reads "better than this share of the others".
"""

from __future__ import annotations

import math
import sqlite3
import statistics
from typing import Any, Mapping

from suite.hardware import public_references
from suite.library import index
from suite.library.summary import HEADLINES

LOWER_IS_BETTER = ("alpha", "baseline.step")
LABELS = {
    **public_references.LABELS,
    "alpha": "α",
    "beta": "β",
    "baseline.step": "baseline step",
}


def percentile(value: float, others: list[float], metric: str) -> float:
    """The share of the others this value is better than (ties count half), 0–100."""
    if metric in LOWER_IS_BETTER:
        better, ties = sum(o > value for o in others), sum(o == value for o in others)
    else:
        better, ties = sum(o < value for o in others), sum(o == value for o in others)
    return 100.0 * (better + ties / 2) / len(others)


def pflop_cost(summary: Mapping[str, Any]) -> float | None:
    """$ per bf16 PFLOP-hour measured on the box: its price per hour over its GPUs' measured bf16 GEMM
    rate."""
    price = (summary.get("labels") or {}).get("price_per_hour")
    tflops, gpus = summary.get("figures", {}).get("gemm.bf16"), summary.get("gpu_count") or 0
    if not price or not tflops or not gpus:
        return None
    return float(price) / (tflops * gpus / 1000.0)


def nearest(summary: Mapping[str, Any], others: list[dict]) -> tuple[dict, float] | None:
    """The other run whose figures are closest (the mean |log ratio| over the figures both have)."""
    mine = summary.get("figures", {})
    best = None
    for other in others:
        shared = [
            m for m in mine if m in other.get("figures", {}) and mine[m] > 0 and other["figures"][m] > 0
        ]
        if not shared:
            continue
        distance = statistics.fmean(abs(math.log(mine[m] / other["figures"][m])) for m in shared)
        if best is None or distance < best[1]:
            best = (other, distance)
    return best


def medians(db: sqlite3.Connection, summary: Mapping[str, Any]) -> dict[str, tuple[float, int]]:
    """metric → (the median over the other runs of the model, how many), for the figures this run has."""
    out = {}
    for metric in summary.get("figures", {}):
        others = index.values(db, summary.get("gpu_model") or "", metric, excluding=summary["key"])
        if others:
            out[metric] = (statistics.median(others), len(others))
    return out


def placement(db: sqlite3.Connection, summary: Mapping[str, Any]) -> list[str]:
    model = summary.get("gpu_model")
    if not model:
        return ["no GPU model in this run (a CPU rehearsal, or no topology read): nothing to place it among"]
    others = [s for s in index.listed(db, gpu_model=model) if s["key"] != summary["key"]]
    if not others:
        return [f"the library holds no other {model} run yet: this one is the first"]
    lines = []
    for metric, value in summary.get("figures", {}).items():
        got = index.values(db, model, metric, excluding=summary["key"])
        if not got:
            continue
        unit = HEADLINES[metric]
        runs = f"{len(got)} other {model} run{'s' if len(got) != 1 else ''}"
        lines.append(
            f"{LABELS[metric]} {value:,.4g} {unit}: percentile {percentile(value, got, metric):.0f} among "
            f"{runs} (median {statistics.median(got):,.4g})"
        )
    if found := nearest(summary, others):
        other, distance = found
        when = other.get("date") or "no date"
        lines.append(
            f"nearest other box: {other['key']} ({when}, {other.get('box_verdict')}), "
            f"figures within {(math.exp(distance) - 1) * 100:.0f} % on average"
        )
    cost = pflop_cost(summary)
    if cost is not None:
        price = summary["labels"]["price_per_hour"]
        rate = summary["figures"]["gemm.bf16"] * summary["gpu_count"] / 1000
        theirs = [c for c in map(pflop_cost, others) if c is not None]
        lines.append(
            f"cost per measured bf16 PFLOP-hour: ${cost:.2f} (${price:g}/h ÷ {rate:.2f} PFLOP/s)"
            + (f"; median of the others ${statistics.median(theirs):.2f}" if theirs else "")
        )
    return lines
