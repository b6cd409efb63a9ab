"""Small pieces both nccl-tests readers share (the text table in nccl_tests.py, the -J report in
nccl_tests_json.py): program names, number coercion, the rank count read back from busbw/algbw."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

PROGRAMS = (
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "alltoallv",
    "alltoall",
    "broadcast",
    "sendrecv",
    "hypercube",
    "gather",
    "scatter",
    "reduce",
)


def _int_or_float(value: float | None) -> int | float | None:
    if value is None:
        return None
    return int(value) if value == int(value) and abs(value) < 2**63 else value


def _is_int(token: str) -> bool:
    digits = token[1:] if token[:1] == "-" else token
    return digits.isascii() and digits.isdigit()


def program_name(text: str) -> str | None:
    """`./build/all_reduce_perf_mpi` or `03-k80-all_reduce-….txt` → `all_reduce`; None when no program is
    named."""
    base = Path(text).name
    for name in PROGRAMS:
        if re.search(rf"(?:^|[^a-z]){name}(?:_perf|[^a-z]|$)", base):
            return name
    return None


def _nranks_from_ratio(collective: str | None, rows: list[dict[str, Any]]) -> int | None:
    """n from busbw/algbw where the output has no rank lines: all_reduce 2(n−1)/n, gather/scatter-like
    (n−1)/n."""
    if collective not in ("all_reduce", "all_gather", "reduce_scatter", "alltoall"):
        return None
    best = None
    for row in rows:
        half = row.get("oop") or {}
        if (
            half.get("algbw")
            and half.get("busbw") is not None
            and (best is None or half["algbw"] > best["algbw"])
        ):
            best = half
    if best is None:
        return None
    r = best["busbw"] / best["algbw"]
    k = 2.0 if collective == "all_reduce" else 1.0
    if r >= k * 0.999:
        return None
    n = k / (k - r)
    return round(n) if abs(n - round(n)) / n < 0.05 and round(n) >= 2 else None
