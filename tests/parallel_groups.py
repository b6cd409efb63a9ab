"""How `make test` spreads the tests over its workers (pytest-xdist, `-n 2`): a pytest plugin.

Every end-to-end test, and every test reading the session's one rehearsal (the `rehearsal_run` fixture), runs on
one worker, one after another: they share that rehearsal, the loopback sshd's host venvs, the Docker engine and
the namespaces' fixed ports, and a session fixture would run once per worker. Every other module is one unit of
work, so that its module fixtures (one launch serving many cases) run once. The serial part is collected first:
it is the longest, and the other worker takes the other modules meanwhile. Without xdist nothing changes but the
order. (xdist's own `--dist loadgroup` cannot be used: with pytest 9 the group it writes into a test's node id
is lost, so the scheduler is chosen here.)
"""

from __future__ import annotations

import pytest

from tests.ci_skips import is_e2e

SERIAL = "serial-e2e"
# Test files outside tests/e2e that read the session's rehearsal; the collection hook refuses any other.
SHARES_THE_REHEARSAL = ("tests/dist/test_overlap_profile_stages.py",)


def serial_file(path: str) -> bool:
    return path.startswith("tests/e2e/") or path in SHARES_THE_REHEARSAL


def scope_of(nodeid: str) -> str:
    """The unit of work a test belongs to: SERIAL, else its module (its class's tests stay with it)."""
    path = nodeid.split("::", 1)[0]
    return SERIAL if serial_file(path) else path


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        path = item.nodeid.split("::", 1)[0]
        if "rehearsal_run" in getattr(item, "fixturenames", ()) and not serial_file(path):
            raise pytest.UsageError(f"{item.nodeid} reads the session's rehearsal: add {path} to "
                                    "SHARES_THE_REHEARSAL in tests/parallel_groups.py (it must run on the e2e worker)")
        if is_e2e(item) and not serial_file(path):
            raise pytest.UsageError(f"{item.nodeid} is an e2e test outside tests/e2e: move it there")
    items.sort(key=lambda item: scope_of(item.nodeid) != SERIAL)  # stable: the order within each part is kept


@pytest.hookimpl(optionalhook=True)  # a hook of xdist's, absent without it
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    from xdist.scheduler import LoadScopeScheduling

    class SerialEndToEnd(LoadScopeScheduling):
        """xdist's per-module scheduling, with every serial test in one unit."""

        def _split_scope(self, nodeid: str) -> str:
            return scope_of(nodeid)

    return SerialEndToEnd(config, log)
