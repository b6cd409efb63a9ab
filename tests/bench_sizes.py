"""A million-row nccl-tests sweep (~120 MB, the size of a long `-b 8 -e 16g -i 16` sweep run in a loop): parse
it and ingest it in fresh children (the fastest of RUNS each), and print wall time and peak memory beside the
targets (≤ 15 s and ≤ 1.5 GB for the parse; the ingest at most twice the parse plus the fixed start-up, the
ingest of a one-row capture).

    python -m tests.bench parse_million_rows
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CAPTURE = REPO / "tests/data/nccl-tests/10-h100-all_reduce-2node-16rank-mpi-warnings-interleaved.txt"
ROWS = 1_000_000
ROW = (
    "{size:>12} {count:>13}     float     sum      -1    {t:6.2f}  {bw:6.2f}  {bus:6.2f}      0    "
    "{t:6.2f}  {bw:6.2f}  {bus:6.2f}      0\n"
)
OVER = 4
"""An ingest still running at this many times its target is stopped: the figure is then "over 4 ×"."""
PARSE = "import sys; from suite.parsers import nccl_tests; nccl_tests.parse_file(sys.argv[1])"
PROBE = (
    "import resource, subprocess, sys, time; t = time.monotonic(); "
    "r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True); "
    "print(time.monotonic() - t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, r.returncode)"
)


def write_sweep(path: Path, rows: int) -> int:
    """The capture's own header and footer around `rows` rows of growing size: its bytes."""
    text = CAPTURE.read_text()
    header_end = text.index("\n", text.index("#        (B)")) + 1
    footer = text[text.index("# Out of bounds") :]
    with open(path, "w") as f:
        f.write(text[:header_end])
        for i in range(rows):
            size = 8 + 4 * i
            t = 20.0 + i * 1e-4
            f.write(
                ROW.format(
                    size=size,
                    count=size // 4,
                    t=t % 10000,
                    bw=size / t / 1e3 % 1000,
                    bus=size / t / 1e3 * 1.875 % 1000,
                )
            )
        f.write(footer)
    return path.stat().st_size


def measured(argv: list[str], limit_s: float | None = None) -> tuple[float, float, int] | None:
    """A command in a fresh child: wall seconds, its peak RSS in MiB, exit code; None when it ran past
    `limit_s` and was killed (a figure far over its target says no more by running to the end)."""
    probe = subprocess.Popen(
        [sys.executable, "-c", PROBE, *argv],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    try:
        out, _ = probe.communicate(timeout=limit_s)
    except subprocess.TimeoutExpired:
        os.killpg(probe.pid, signal.SIGKILL)
        probe.communicate()
        return None
    seconds, rss_kib, code = out.split()
    return float(seconds), int(rss_kib) / 1024, int(code)


RUNS = 3
"""Each timed command runs this many times and its fastest run is the figure (timeit's rule: the slower runs
measure what else the machine was doing); its peak memory is the largest of them."""


def fastest(argv: list[str], limit_s: float | None = None) -> tuple[float, float, int] | None:
    """`measured` RUNS times: the fastest wall time, the largest peak RSS, the last exit code; None when a run
    passed `limit_s`."""
    runs = []
    for _ in range(RUNS):
        run = measured(argv, limit_s)
        if run is None:
            return None
        runs.append(run)
    return min(r[0] for r in runs), max(r[1] for r in runs), runs[-1][2]


def parse_million_rows() -> None:
    with tempfile.TemporaryDirectory() as d:
        sweep, small = Path(d) / "all_reduce_perf-1M.out", Path(d) / "all_reduce_perf-1.out"
        size = write_sweep(sweep, ROWS)
        write_sweep(small, 1)
        load = os.getloadavg()[0]
        parse = fastest([sys.executable, "-c", PARSE, str(sweep)])
        print(
            f"parse, {ROWS:,} rows ({size / 1e6:.0f} MB), fastest of {RUNS}: {parse[0]:.1f} s, peak RSS "
            f"{parse[1]:.0f} MiB, exit {parse[2]} (target ≤ 15 s, ≤ 1536 MiB; load {load:.1f})"
        )
        shown = measured([sys.executable, "-m", "suite", "parse", "nccl-tests", str(sweep)])
        print(
            f"suite parse nccl-tests (the parse printed as JSON): {shown[0]:.1f} s, peak RSS {shown[1]:.0f} "
            f"MiB, "
            f"exit {shown[2]}"
        )
        fixed = fastest([sys.executable, "-m", "suite", "ingest", str(small), "--out", f"{d}/runs"])
        target = 2 * parse[0] + fixed[0]
        limit = OVER * target
        ingest = fastest([sys.executable, "-m", "suite", "ingest", str(sweep), "--out", f"{d}/runs"], limit)
        figures = (
            f"stopped after {limit:.0f} s, {OVER} × the target"
            if ingest is None
            else f"{ingest[0]:.1f} s, peak RSS {ingest[1]:.0f} MiB, exit {ingest[2]}"
        )
        print(
            f"ingest, the same sweep, fastest of {RUNS}: {figures} (target ≤ 2 × parse + start-up = "
            f"{target:.1f} s; start-up, a one-row ingest: {fixed[0]:.1f} s)"
        )
