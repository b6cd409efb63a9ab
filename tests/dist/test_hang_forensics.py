"""Hang forensics on real 4-rank gloo launches: a rank stopped (SIGSTOP), a rank asleep in Python before
its collective and a rank killed (SIGKILL), each before all_reduce #6 (suite/forensics/drill.py). The
launcher asks the ranks before it kills them and must name rank 2, this host and the sequence number.

The five launches run at once (one launch's wait is the others' start-up); a hang's launch times out after
HANG_TIMEOUT_S, long enough for every rank to reach its collective on a loaded two-core machine.
"""

from __future__ import annotations

import json
import socket
from concurrent.futures import ThreadPoolExecutor

import pytest

from suite.config import GLOO_CPU
from suite.forensics.collect import RESULT
from suite.launch.forklaunch import launch
from suite.launch.torchrun import LaunchError

pytestmark = pytest.mark.dist

HANG_TIMEOUT_S = 45.0
CASES = (("stop", "fork"), ("sleep", "fork"), ("kill", "fork"), ("stop", "torchrun"), ("kill", "torchrun"))
HOST = socket.gethostname()


def drill(raw, kind: str, launcher: str) -> str:
    """The launch's failure message (a drill that ends well is a failed test)."""
    try:
        launch(
            GLOO_CPU.with_overrides(launcher=launcher),
            "suite.forensics.drill",
            ["--kind", kind, "--rank", "2", "--at", "6"],
            raw_dir=raw,
            nproc=4,
            timeout_s=HANG_TIMEOUT_S,
        )
    except LaunchError as e:
        return str(e)
    return "the drill ended without a failure"


@pytest.fixture(scope="module")
def drills(tmp_path_factory):
    """(kind, launcher) → (failure message, forensics.json)."""
    raws = {case: tmp_path_factory.mktemp("-".join(case)) for case in CASES}
    with ThreadPoolExecutor(len(CASES)) as pool:
        messages = dict(zip(CASES, pool.map(lambda c: drill(raws[c], *c), CASES)))
    return {c: (messages[c], json.loads((raws[c] / RESULT).read_text())) for c in CASES}


def rows_of(found: dict) -> dict[int, dict]:
    return {r["rank"]: r for r in found["rows"] if r["pg"] == "default_pg"}


@pytest.mark.parametrize("launcher", ["fork", "torchrun"])
def test_a_stopped_rank_is_named_and_the_others_wait_in_the_collective(drills, launcher):
    message, found = drills[("stop", launcher)]
    assert found["reason"] == "timeout"
    assert found["line"].startswith(f"rank 2 on {HOST} was stopped")
    assert "the other 3 wait in all_reduce #6" in found["line"]
    assert found["line"] in message  # the stage's failure says it too
    rows = rows_of(found)
    assert rows[2]["heard"].startswith("stopped: process state T")
    assert {r: rows[r]["first_pending"] for r in (0, 1, 3)} == dict.fromkeys((0, 1, 3), "all_reduce #6")
    assert {r: rows[r]["last_completed"] for r in (0, 1, 3)} == dict.fromkeys((0, 1, 3), "all_reduce #5")
    assert all(rows[r]["host"] == HOST for r in range(4))


def test_a_rank_asleep_in_python_never_entered_the_collective_and_its_line_is_shown(drills):
    _, found = drills[("sleep", "fork")]
    assert found["line"].startswith(f"rank 2 on {HOST} never entered all_reduce #6 (it is at drill.py:")
    assert found["line"].endswith("the other 3 wait in it")
    rows = rows_of(found)
    assert (rows[2]["last_completed"], rows[2]["first_pending"], rows[2]["heard"]) == (
        "all_reduce #5",
        "—",
        "answered",
    )
    assert "in misbehave" in rows[2]["where"]
    assert all("drill.py" in rows[r]["where"] and "in main" in rows[r]["where"] for r in (0, 1, 3))


def test_a_killed_rank_is_named_with_its_signal_and_its_peers_collective(drills):
    message, found = drills[("kill", "fork")]
    assert found["reason"] == "failed"
    assert found["line"].startswith(f"rank 2 on {HOST} died (exit code -9: killed by SIGKILL)")
    # its peers' sockets reset inside all_reduce #6; each left a post-mortem saying so before it exited
    assert "were in all_reduce #6" in found["line"]
    posted = [r for r in rows_of(found).values() if r["heard"].startswith("post_mortem")]
    assert posted and all(r["first_pending"] == "all_reduce #6" for r in posted)


def test_under_torchrun_the_killed_rank_is_read_from_its_failure_summary(drills):
    _, found = drills[("kill", "torchrun")]
    assert found["line"].startswith(
        f"rank 2 on {HOST} died (exit code -9: Signal 9 (SIGKILL) received by PID"
    )
    others = {r: rows_of(found)[r]["heard"] for r in (0, 1, 3)}
    # torchrun SIGTERMs the others at once: whoever left no record was ended after rank 2, not blamed
    assert all(h.startswith(("post_mortem", "ended")) for h in others.values()), others
