"""Skips that CI cannot hide: a pytest plugin (tests/conftest.py loads its hooks).

An end-to-end test skips when the machine lacks what it needs (sshd, Chromium, a Docker engine, …).
On a laptop that is fine. In CI (`CI=true`) a skip would let the run stay green having tested
nothing, so there a skipped e2e test fails, unless .ci/run probed the capability the test needs,
printed "capability NAME: missing because …" and listed NAME in $CARDTIME_MISSING_CAPABILITIES.
A test says what it needs with a marker; an e2e test that skips without one fails in CI too:

    pytestmark = [pytest.mark.e2e, pytest.mark.needs("sshd")]

Either way, the end of the run lists every skipped test with its reason.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

MISSING_ENV = "CARDTIME_MISSING_CAPABILITIES"

# The capabilities e2e tests may need; .ci/capabilities.sh probes each by the same name.
CAPABILITIES = {
    "sshd": "openssh-server, run on 127.0.0.1 (the remote tests)",
    "s3": "moto's S3 server on 127.0.0.1 (the archive tests)",
    "chromium": "headless Chromium (the report's browser tests)",
    "docker": "a Docker engine that answers (the image tests)",
    "debian-base": "a local Debian base image: debootstrap and the Debian mirror, or the cached tarball",
    "cuda-image": "the CUDA image CI builds before the tests (docker/build-cuda-image.sh ci → "
    "cardtime:cuda-ci)",
    "netns": "root and network namespaces (the two-node tests)",
    "openmpi": "Open MPI's mpirun (the two-node mpirun test; apt-get install openmpi-bin)",
    "slurm": "slurmctld, slurmd, sbatch and munged (the two-node Slurm test; apt-get install slurmctld "
    "slurmd "
    "slurm-client munge)",
}


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")


def declared_missing() -> set[str]:
    """What .ci/run said this machine lacks (comma- or space-separated names)."""
    return {name for name in os.environ.get(MISSING_ENV, "").replace(",", " ").split() if name}


def needed(item: pytest.Item) -> list[str]:
    return [name for mark in item.iter_markers("needs") for name in mark.args]


def is_e2e(item: pytest.Item) -> bool:
    return item.get_closest_marker("e2e") is not None or "e2e" in Path(str(item.path)).parts


def skip_reason(report: pytest.TestReport) -> str:
    if isinstance(report.longrepr, tuple) and len(report.longrepr) == 3:
        return str(report.longrepr[2]).removeprefix("Skipped: ")
    return str(report.longrepr)


def ci_skip_problem(needs: list[str], missing: set[str], reason: str) -> str | None:
    """Why this e2e skip must fail the CI run, or None when .ci/run declared a capability it needs missing."""
    if not needs:
        return (
            f"skipped in CI ({reason}), and the test names no capability it needs: mark it "
            f"pytest.mark.needs(NAME) with NAME one of {', '.join(CAPABILITIES)}"
        )
    if missing & set(needs):
        return None
    return (
        f"skipped in CI ({reason}), but .ci/run did not declare capability {' or '.join(needs)} missing "
        f"(${MISSING_ENV}={' '.join(sorted(missing)) or '(empty)'}): install it, or make .ci/run's probe say "
        f"why not"
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "needs(*capabilities): what the test needs from the machine "
        f"(tests/ci_skips.py: {', '.join(CAPABILITIES)}); a CI skip must be declared",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        unknown = [name for name in needed(item) if name not in CAPABILITIES]
        if unknown:
            raise pytest.UsageError(
                f"{item.nodeid}: unknown capability {', '.join(unknown)} in pytest.mark.needs: "
                f"one of {', '.join(CAPABILITIES)} (tests/ci_skips.py)"
            )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    report = yield
    if report.skipped and not hasattr(report, "wasxfail") and in_ci() and is_e2e(item):
        problem = ci_skip_problem(needed(item), declared_missing(), skip_reason(report))
        if problem is not None:
            report.outcome = "failed"
            report.longrepr = problem
    return report


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector):
    """A whole e2e module skipped at import (allow_module_level) cannot say what it needs: in CI, a
    failure."""
    report = yield
    if report.skipped and in_ci() and "e2e" in Path(str(collector.path)).parts:
        report.outcome = "failed"
        report.longrepr = (
            f"skipped in CI at import ({skip_reason(report)}): skip in a fixture or with skipif, "
            "and mark the tests pytest.mark.needs(NAME), so .ci/run can declare NAME missing"
        )
    return report


def pytest_terminal_summary(terminalreporter, exitstatus, config: pytest.Config) -> None:
    skipped = [r for r in terminalreporter.stats.get("skipped", []) if not hasattr(r, "wasxfail")]
    terminalreporter.section(f"skipped: {len(skipped)} test(s)")
    for report in skipped:
        terminalreporter.line(f"SKIP  {report.nodeid}: {skip_reason(report)}")
    if in_ci():
        missing = declared_missing()
        terminalreporter.line(
            f"CI: capabilities .ci/run declared missing: {', '.join(sorted(missing)) or 'none'}; "
            "any other e2e skip failed the run"
        )
