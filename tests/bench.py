"""Timing figures, printed, never asserted (a shared 2-core machine is too noisy for timed tests).

    python -m tests.bench            # or: make bench

Each figure is a function below printing one or more lines `name: value unit (target)`.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BENCHES = []


def bench(fn):
    BENCHES.append(fn)
    return fn


@bench
def rehearsal_wall_time() -> None:
    """The full gloo-cpu rehearsal once the venv exists (target: under 120 s on the 2-core machine)."""
    with tempfile.TemporaryDirectory() as out:
        start = time.monotonic()
        result = subprocess.run([sys.executable, "-m", "suite", "run", "--profile", "gloo-cpu", "--out", out],
                                cwd=REPO, capture_output=True, text=True)
        seconds = time.monotonic() - start
        summary = [line for line in result.stderr.splitlines() if line.startswith("summary:")]
        per_stage = [line for line in result.stderr.splitlines() if " done:" in line or "FAILED" in line]
    print(f"rehearsal wall time: {seconds:.1f} s (target < 120 s); exit {result.returncode}")
    for line in per_stage:
        print("  " + line.strip())
    if summary:
        print("  " + summary[-1])


def main(argv: list[str]) -> int:
    wanted = set(argv)
    for fn in BENCHES:
        if not wanted or fn.__name__ in wanted:
            fn()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
