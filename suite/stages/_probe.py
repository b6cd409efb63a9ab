"""The primitive probe's rows (suite/workloads/probe.py), summed over ranks and judged: used by the bandwidth
stage and by `python -m suite probe`. Not a stage: the underscore keeps it out of discovery.

    for result in summarize(rows): print(result.name, result.status, result.detail)
    verdicts = probe_verdicts("bandwidth", rows)

A primitive is `ok` when it ran on every rank and every element equals its expected value, `wrong` when it
ran but some element differs (a fail: the backend says it supports it and computes garbage), `error` when
some rank raised (unsupported here: a warning carrying the error's first line), `not run` when it cannot run
on this world (point-to-point on one rank: a skip), `missing` when a rank wrote no row for it (a fail).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from suite.results import Row, Verdict
from suite.verdicts import verdicts_for

CASE_PREFIX = "probe."
PRIMITIVES = (
    "all_reduce",
    "all_gather",
    "all_gather_into_tensor",
    "reduce_scatter_tensor",
    "all_to_all_single",
    "broadcast",
    "barrier",
    "send_recv",
    "isend_irecv",
    "batch_isend_irecv",
)
"""What suite/workloads/probe.py tries (one trial function each, same names), in this order."""
MISTAKE_PREFIX = "wrong."
MISTAKES = tuple(MISTAKE_PREFIX + p for p in PRIMITIVES if p != "barrier")
"""The tests' deliberate mistakes: the last rank adds 1 to the primitive's result before the check."""
STATUS_OF = {"ok": "pass", "wrong": "fail", "error": "warn", "not run": "skip", "missing": "fail"}


@dataclass(frozen=True)
class ProbeResult:
    name: str
    status: str
    """ok, wrong, error, not run or missing (see the module's doc)."""
    detail: str
    ranks: int


def summarize(rows: list[Row]) -> list[ProbeResult]:
    """One result per primitive in PRIMITIVES order; the world is the largest any probe row reports."""
    mine = [r for r in rows if r.case.startswith(CASE_PREFIX) and r.metric == "wrong"]
    world = max((r.world or 0 for r in mine), default=0)
    out = []
    for name in PRIMITIVES:
        by_rank = {r.rank: r for r in mine if r.case == CASE_PREFIX + name}
        texts = [by_rank[k].text or "" for k in sorted(by_rank, key=lambda k: -1 if k is None else k)]
        errors = [
            (k, t)
            for k, t in zip(sorted(by_rank, key=lambda k: -1 if k is None else k), texts)
            if t.startswith("error")
        ]
        wrong = sum(r.value for r in by_rank.values() if not math.isnan(r.value))
        missing = sorted(set(range(world)) - set(by_rank))
        if errors:
            ranks = ", ".join(str(k) for k, _ in errors)
            status, detail = "error", f"rank {ranks}: {errors[0][1].removeprefix('error: ')}"
        elif any(t.startswith("not run") for t in texts):
            status, detail = "not run", texts[0].removeprefix("not run: ")
        elif missing or not by_rank:
            status, detail = (
                "missing",
                (f"no row from rank {', '.join(map(str, missing))}" if missing else "no row"),
            )
        elif wrong:
            bad = [str(k) for k, r in sorted(by_rank.items()) if r.value]
            status, detail = "wrong", f"{wrong:g} wrong elements (rank {', '.join(bad)})"
        else:
            status, detail = (
                "ok",
                f"every element right on {len(by_rank)} ranks"
                if name != "barrier"
                else f"completed on {len(by_rank)} ranks",
            )
        out.append(ProbeResult(name=name, status=status, detail=detail, ranks=len(by_rank)))
    return out


def unknown_mistakes(mistakes: list[str]) -> str | None:
    """A line naming the mistakes that do not exist, or None."""
    unknown = [m for m in mistakes if m not in MISTAKES]
    return f"unknown mistake(s) {unknown}: choose from {', '.join(MISTAKES)}" if unknown else None


def probe_verdicts(stage: str, rows: list[Row]) -> list[Verdict]:
    """One verdict per primitive; none when no probe row exists (a run from before the probe)."""
    if not any(r.case.startswith(CASE_PREFIX) for r in rows):
        return []
    v = verdicts_for(stage)
    out = []
    for result in summarize(rows):
        reason = {
            "ok": "supported, and the result equals the expected value elementwise",
            "wrong": f"the backend runs {result.name} but computes wrong values: a broken link, driver or "
            f"library — "
            f"rerun `python -m suite probe` and check dmesg / nvidia-smi -q for errors",
            "error": f"{result.name} is not supported by this backend here: code that needs it must use "
            f"another "
            f"primitive (see the error)",
            "not run": "nothing to try on this world",
            "missing": "the probe stopped before this primitive on some rank: see the rank logs",
        }[result.status]
        out.append(
            v.verdict(
                f"probe.{result.name}",
                STATUS_OF[result.status],
                expected="runs on every rank; every element equals its expected value",
                observed=f"{result.status}: {result.detail}",
                reason=reason,
            )
        )
    return out
