"""`make test-load`: the rehearsal's e2e tests under the load generator, several times; the verdicts compared.

    python -m tests.load_verdicts [--runs 3] [--loops 4] [--tests tests/e2e/test_rehearsal.py ...]

Each run is one pytest session of the rehearsal's e2e tests (their session fixture runs the whole rehearsal
once) beside `--loops` busy loops (tests/loadgen.py). Every run's verdicts (id → status) are read from the
run directory the fixture left under that session's --basetemp. Printed: the verdict ids whose status
differed between runs (or that some runs lack), one line each with the status per run. Exit 1 when any
verdict differed, any pytest session failed or a run left no run directory; 0 otherwise. A verdict that
moves under load depends on how busy the machine is, not on what the code does.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from suite.results import RunDir
from tests.loadgen import busy_loops

REHEARSAL_TESTS = ("tests/e2e/test_rehearsal.py", "tests/e2e/test_rehearsal_collectives.py")


def run_dirs(basetemp: Path) -> list[Path]:
    """The run directories a pytest session left (the rehearsal fixture's: a manifest.json beside
    verdicts)."""
    return sorted(
        p.parent for p in basetemp.glob("**/manifest.json") if (p.parent / RunDir.VERDICTS).exists()
    )


def statuses(run: Path) -> dict[str, str]:
    return {v.id: v.status for v in RunDir.load(run).verdicts()}


def differences(runs: list[dict[str, str]]) -> dict[str, list[str]]:
    """Verdict id → its status in each run ("-" where absent), for the ids not the same in all runs."""
    ids = sorted(set().union(*runs)) if runs else []
    table = {i: [r.get(i, "-") for r in runs] for i in ids}
    return {i: got for i, got in table.items() if len(set(got)) > 1}


def one_run(
    index: int, base: Path, tests: list[str], loops: int, max_s: float
) -> tuple[int, dict[str, str] | None]:
    basetemp = base / f"run{index}"
    started = time.monotonic()
    with busy_loops(loops, max_s):
        rc = subprocess.call(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--basetemp={basetemp}", *tests]
        )
    found = run_dirs(basetemp)
    print(
        f"load run {index + 1}: pytest exit {rc}, {len(found)} run directory(ies), "
        f"{time.monotonic() - started:.0f} s beside {loops} busy loops",
        flush=True,
    )
    return rc, statuses(found[0]) if found else None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--loops", type=int, default=4, help="busy loops beside each run")
    p.add_argument(
        "--max-s", type=float, default=1800.0, help="the loops stop by themselves after this, per run"
    )
    p.add_argument("--tests", nargs="+", default=list(REHEARSAL_TESTS))
    p.add_argument(
        "--keep", type=Path, default=None, help="keep the runs' folders here (default: a temporary one)"
    )
    args = p.parse_args(argv)
    if args.runs < 1:
        p.error("--runs must be at least 1")
    with tempfile.TemporaryDirectory(prefix="cardtime-load-") as tmp:
        base = args.keep or Path(tmp)
        base.mkdir(parents=True, exist_ok=True)  # pytest makes --basetemp itself, not its parents
        results = [one_run(i, base, args.tests, args.loops, args.max_s) for i in range(args.runs)]
    failed = [i + 1 for i, (rc, _) in enumerate(results) if rc != 0]
    missing = [i + 1 for i, (_, got) in enumerate(results) if got is None]
    differ = differences([got for _, got in results if got is not None])
    for verdict, got in differ.items():
        print(f"differs: {verdict}: {' / '.join(got)}")
    counts = [len(got) for _, got in results if got is not None]
    print(
        f"test-load: {args.runs} run(s) beside {args.loops} busy loops, {counts} verdicts, {len(differ)} "
        f"differing"
        + (f", pytest failed in run(s) {failed}" if failed else "")
        + (f", no run directory in run(s) {missing}" if missing else "")
    )
    return 1 if differ or failed or missing else 0


if __name__ == "__main__":
    sys.exit(main())
