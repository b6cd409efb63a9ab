"""Shared fixtures. The rehearsal runs once per test session and serves every test that reads a real run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

# In CI a skipped e2e test fails unless .ci/run declared its capability missing; every run lists its skips.
from tests.ci_skips import (  # noqa: F401 - pytest finds the hooks by name in this module
    pytest_collection_modifyitems,
    pytest_configure,
    pytest_make_collect_report,
    pytest_runtest_makereport,
    pytest_terminal_summary,
)

REPO = Path(__file__).resolve().parent.parent
PYTHON = sys.executable


@pytest.fixture(scope="session", autouse=True)
def figure_cache(tmp_path_factory) -> Path:
    """The report's figure cache (reports/figures/_cache.py) in this session's temporary folder, not the user's:
    a run's report rendered again by a later test (and by subprocesses, which inherit it) is not drawn again."""
    folder = tmp_path_factory.mktemp("figure-cache")
    previous = os.environ.get("CARDTIME_FIGURE_CACHE")
    os.environ["CARDTIME_FIGURE_CACHE"] = str(folder)
    yield folder
    if previous is None:
        os.environ.pop("CARDTIME_FIGURE_CACHE", None)
    else:
        os.environ["CARDTIME_FIGURE_CACHE"] = previous


def run_suite(*args: str, env: dict[str, str] | None = None, timeout: float = 900, cwd: Path = REPO,
              **kwargs) -> subprocess.CompletedProcess:
    """`python -m suite ARGS` as a user runs it; output captured."""
    return subprocess.run([PYTHON, "-m", "suite", *args], cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=timeout, **kwargs)


@pytest.fixture(scope="session")
def rehearsal_run(tmp_path_factory) -> Path:
    """The full gloo-cpu rehearsal, run once: its run directory (report rendered too)."""
    out = tmp_path_factory.mktemp("rehearsal")
    last = out / "LAST"
    result = run_suite("run", "--profile", "gloo-cpu", "--out", str(out), "--record-last", str(last))
    assert last.exists(), f"the rehearsal did not start:\n{result.stderr[-3000:]}"
    run_dir = Path(last.read_text().strip())
    report = subprocess.run([PYTHON, "-m", "reports", str(run_dir)], cwd=REPO, capture_output=True, text=True,
                            timeout=300)
    run_dir.joinpath("rehearsal-output.txt").write_text(
        f"exit {result.returncode}\n{result.stderr}\n--- reports ---\n{report.stdout}{report.stderr}")
    return run_dir
