"""One nccl-tests `*_perf` binary watched size by size, stopped before its next size would pass its time.

nccl-tests prints one table line per size as it finishes it. The binary runs under `stdbuf -oL` (its stdout is
a file: without it stdio holds every line until exit), and its output file is read as it grows: the time
between two lines is the later size's wall time (warm-up, both placements, the check), and the next size is
predicted from it (suite/costmodel/size_budget.py). When the prediction passes the binary's share of the
stage's time, the binary is stopped (its process group: mpirun's ranks too) and the sizes it did not reach are
returned with the reason. The lines already printed are untouched in the .out file and parse as a partial
table.

The first line's time holds the communicator's start-up, so it predicts nothing: the box starts at the second.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

from suite.costmodel.size_budget import SizeBudget
from suite.parsers import ParseError
from suite.parsers.nccl_tests import parse_text

POLL_S = 0.2
"""How often the growing output is read."""
STOP_GRACE_S = 5.0
"""After SIGTERM, how long the binary has to exit before SIGKILL (mpirun forwards the TERM to its ranks)."""


def line_buffered(argv: list[str]) -> tuple[list[str], bool]:
    """`stdbuf -oL <binary> …` where stdbuf exists (coreutils); (argv, whether the lines come as printed)."""
    stdbuf = shutil.which("stdbuf")
    return ([stdbuf, "-oL", *argv], True) if stdbuf else (argv, False)


def sizes_printed(out: Path) -> list[int]:
    """The sizes of the table lines the output holds so far."""
    try:
        text = out.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return []
    try:
        return [r["size"] for r in parse_text(text)["rows"]]
    except ParseError:
        return []


def stop(proc: subprocess.Popen) -> None:
    """TERM the binary's group, then KILL what is left."""
    for sig, wait in ((signal.SIGTERM, STOP_GRACE_S), (signal.SIGKILL, None)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(timeout=wait)
            break
        except subprocess.TimeoutExpired:
            continue
    proc.wait()


def watch(
    proc: subprocess.Popen,
    out: Path,
    planned: list[int],
    name: str,
    budget_s: float | None,
    timeout_s: float | None,
    clock=time.monotonic,
) -> tuple[int | None, list[tuple[int, str]]]:
    """Wait for the binary, stopping it when its next planned size would pass `budget_s` from now (None:
    never); `timeout_s` kills it whatever it prints. (exit code, None when stopped or killed; the sizes not
    run, why)."""
    start = clock()
    box = SizeBudget(total_s=budget_s, series=[name])
    seen: list[int] = []
    last_event = None
    while True:
        try:
            return proc.wait(timeout=POLL_S), []
        except subprocess.TimeoutExpired:
            pass
        now = clock()
        if timeout_s is not None and now - start > timeout_s:
            stop(proc)
            return None, []
        sizes = sizes_printed(out)
        if len(sizes) <= len(seen):
            continue
        new, timed = sizes[len(seen) :], last_event is not None  # the first line's time holds the start-up
        box.after(name, new[-1], (now - last_event) / len(new) if timed else 0.0, now - start)
        seen, last_event = sizes, now
        later = [s for s in planned if s > seen[-1]]
        # Decided as a line appears, when the next size has just begun: its time is predicted, not waited for.
        why = box.before(name, later[0]) if later and timed else None
        if why is not None:
            stop(proc)
            return None, [(s, why) for s in later]
