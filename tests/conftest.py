"""Shared fixtures. The rehearsal runs once per test session and serves every test that reads a real run."""

from __future__ import annotations

import os
import shlex
import signal
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
from tests.readme_quickstart import quickstart_commands, without_make

# How `make test` spreads the tests over its workers (tests/parallel_groups.py).
pytest_plugins = ("tests.parallel_groups",)

REPO = Path(__file__).resolve().parent.parent
PYTHON = sys.executable

# Ctrl-C as a terminal gives it, to this process and so to every child the tests start and interrupt: a
# session started in the background (`make test &`, nohup) inherits SIGINT ignored, which its children would
# inherit too (a Python started so keeps ignoring it), and the tests of Ctrl-C would see a run that cannot be
# interrupted.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(scope="session", autouse=True)
def figure_cache(tmp_path_factory) -> Path:
    """The report's figure cache (reports/figures/_cache.py) in this session's temporary folder, not the
    user's: a run's report rendered again by a later test (and by subprocesses, which inherit it) is not drawn
    again."""
    folder = tmp_path_factory.mktemp("figure-cache")
    # and no figure drawer beside the tests' runs (suite/figure_drawer.py): few of them render a report, and
    # its CPU would slow the others; the rehearsal fixture, run as `make rehearse` runs, keeps it
    # and the library every ingest and fetch indexes into (suite/library/index.py) is the session's too, so
    # that `suite plan` learns nothing from the tests' runs, nor from the user's runs/library.sqlite
    chosen = {
        "CARDTIME_FIGURE_CACHE": str(folder),
        "CARDTIME_PREDRAW": "off",
        "CARDTIME_LIBRARY": str(tmp_path_factory.mktemp("library") / "library.sqlite"),
    }
    previous = {name: os.environ.get(name) for name in chosen}
    os.environ.update(chosen)
    yield folder
    for name, value in previous.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


def run_suite(
    *args: str, env: dict[str, str] | None = None, timeout: float = 900, cwd: Path = REPO, **kwargs
) -> subprocess.CompletedProcess:
    """`python -m suite ARGS` as a user runs it; output captured."""
    return subprocess.run(
        [PYTHON, "-m", "suite", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=timeout,
        **kwargs,
    )


@pytest.fixture(scope="session")
def rehearsal_run(tmp_path_factory) -> Path:
    """The full gloo-cpu rehearsal, run once as the README's quickstart has the user type it (`make rehearse`,
    into a runs folder of the session's own: RUNS=): its run directory, report rendered, and what the command
    printed in rehearsal-output.txt."""
    out = tmp_path_factory.mktemp("rehearsal")
    command = quickstart_commands()[0]
    assert command == "make rehearse", command
    result = subprocess.run(
        shlex.split(command),
        cwd=REPO,
        capture_output=True,
        text=True,
        # as typed in a shell, not under the `make test` that runs these tests
        env={**without_make(os.environ), "RUNS": str(out), "CARDTIME_PREDRAW": "on"},
        timeout=1200,
    )
    last = out / "LAST"
    assert last.exists(), f"the rehearsal did not start:\n{result.stdout[-2000:]}{result.stderr[-3000:]}"
    run_dir = Path(last.read_text().strip())
    run_dir.joinpath("rehearsal-output.txt").write_text(
        f"exit {result.returncode}\n{result.stderr}\n--- printed ---\n{result.stdout}"
    )
    return run_dir
