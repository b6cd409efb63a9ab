"""How `make test` spreads the tests over its workers (pytest-xdist, `-n 2`): a pytest plugin.

The end-to-end tests form two serial lines, each run one test after another on one worker, the two side by
side:

  * LABS: the tests that make network namespaces (tests/e2e/two_nodes.py's cluster, the Slurm lab on it).
    Their nodes' names, bridge and fixed ports are the machine's, so one lab exists at a time.
  * LOCAL: every other end-to-end test, and every test reading the session's one rehearsal (the
    `rehearsal_run` fixture: a session fixture runs once per worker, so its readers stay on one).

Both lines use the loopback sshd's host venvs (tests/e2e/remote_loopback.py takes a lock to make them) and the
machine's Docker engine (each test its own tags and names). Every other module is one unit of work, so that
its module fixtures (one launch serving many cases) run once. The two lines are collected first, the longest
first: they are the critical path, and the workers take the other modules once their line is done. Without
xdist nothing changes but the order. (xdist's own `--dist loadgroup` cannot be used: with pytest 9 the group
it writes into a test's node id is lost, so the scheduler is chosen here.)
"""

from __future__ import annotations

import collections

import pytest

from tests.ci_skips import is_e2e

LABS = "serial-e2e-labs"
LOCAL = "serial-e2e-local"
# the order they are handed out: LABS is the longer (measured side by side: 789 s and 573 s)
LINES = (
    LABS,
    LOCAL,
)
# Test files outside tests/e2e that read the session's rehearsal; the collection hook refuses any other.
SHARES_THE_REHEARSAL = ("tests/dist/test_overlap_profile_stages.py",)
# The end-to-end files that make namespaces (pytest.mark.needs("netns")); the collection hook refuses any
# other.
MAKES_NAMESPACES = (
    "tests/e2e/test_two_nodes.py",
    "tests/e2e/test_two_nodes_docker.py",
    "tests/e2e/test_two_nodes_hostile.py",
    "tests/e2e/test_two_nodes_ordinary_logins.py",
    "tests/e2e/test_slurm_host.py",
)


def line_of(path: str) -> str | None:
    """The serial line a test file belongs to, or None for a module of its own."""
    if path in MAKES_NAMESPACES:
        return LABS
    if path.startswith("tests/e2e/") or path in SHARES_THE_REHEARSAL:
        return LOCAL
    return None


def scope_of(nodeid: str) -> str:
    """The unit of work a test belongs to: its serial line, else its module (its class's tests stay with
    it)."""
    path = nodeid.split("::", 1)[0]
    return line_of(path) or path


def needs_namespaces(item: pytest.Item) -> bool:
    return any("netns" in marker.args for marker in item.iter_markers("needs"))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        path = item.nodeid.split("::", 1)[0]
        line = line_of(path)
        if "rehearsal_run" in getattr(item, "fixturenames", ()) and line != LOCAL:
            raise pytest.UsageError(
                f"{item.nodeid} reads the session's rehearsal: add {path} to "
                "SHARES_THE_REHEARSAL in tests/parallel_groups.py (it must run on one worker)"
            )
        if is_e2e(item) and line is None:
            raise pytest.UsageError(f"{item.nodeid} is an e2e test outside tests/e2e: move it there")
        if needs_namespaces(item) and line != LABS:
            raise pytest.UsageError(
                f"{item.nodeid} makes namespaces: add {path} to MAKES_NAMESPACES in "
                "tests/parallel_groups.py (one lab at a time)"
            )
    # The lines first, then the modules with the most tests (xdist's own order); stable: each unit keeps its
    # order.
    counts = collections.Counter(scope_of(item.nodeid) for item in items)

    def rank(item: pytest.Item) -> tuple[int, int]:
        scope = scope_of(item.nodeid)
        return (LINES.index(scope), 0) if scope in LINES else (len(LINES), -counts[scope])

    items.sort(key=rank)


@pytest.hookimpl(optionalhook=True)  # a hook of xdist's, absent without it
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    from xdist.scheduler import LoadScopeScheduling

    config.option.loadscopereorder = (
        False  # xdist would hand out the units by their test count: keep this order
    )

    class SerialEndToEnd(LoadScopeScheduling):
        """xdist's per-module scheduling, with each serial line one unit."""

        def _split_scope(self, nodeid: str) -> str:
            return scope_of(nodeid)

    return SerialEndToEnd(config, log)
