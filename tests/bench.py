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


@bench
def harness_overhead() -> None:
    """Bandwidth stage: the sweep's all_reduce busbw at the largest rehearsal size vs a bare dist.all_reduce loop,
    alternated in one gloo launch (target: the harness within 5% of the bare loop)."""
    import statistics

    from suite.config import GLOO_CPU
    from suite.launch import run_torchrun

    size = max(GLOO_CPU.sweep.sizes())
    repeats, iters = 7, 20
    with tempfile.TemporaryDirectory() as raw:
        result = run_torchrun(GLOO_CPU, "suite.workloads.collective_sweep",
                              ["--sizes", str(size), "--collectives", "all_reduce", "--warmup", "2",
                               "--iters", str(iters), "--bare-repeats", str(repeats)],
                              raw_dir=Path(raw), tag="bench", timeout_s=600)
        rows = result.rows()
    harness = [r.value for r in rows if r.case == "overhead.harness"]
    bare = [r.value for r in rows if r.case == "overhead.bare"]
    h, b = statistics.median(harness), statistics.median(bare)
    print(f"harness overhead, all_reduce {size} B on {GLOO_CPU.nproc} gloo ranks, {repeats} alternations × {iters} iters:")
    print(f"  suite busbw (median): {h:.4f} GB/s")
    print(f"  bare dist.all_reduce busbw (median): {b:.4f} GB/s")
    print(f"  suite / bare: {h / b:.3f} (target ≥ 0.95)")
    print("  pairs: " + ", ".join(f"{x:.3f}/{y:.3f}" for x, y in zip(harness, bare)))


@bench
def image_rebuild() -> None:
    """CPU image rebuild after a change under suite/ (target: under 30 s); skipped without a Docker engine."""
    from .bench_image import image_rebuild_after_a_suite_change

    image_rebuild_after_a_suite_change()


@bench
def fetch_rate() -> None:
    """A run's files fetched over SFTP vs a plain get(), on loopback and behind a 100 ms round trip."""
    from .bench_fetch import fetch_rates

    fetch_rates()


def main(argv: list[str]) -> int:
    wanted = set(argv)
    for fn in BENCHES:
        if not wanted or fn.__name__ in wanted:
            fn()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
