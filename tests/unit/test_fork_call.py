"""suite.launch.procs.fork_call: the one supervised child the runner's stages and the fault drill's
supervisors share."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from suite.launch import procs


def failed(error: BaseException) -> dict:
    return {"error": f"{type(error).__name__}: {error}"}


def test_the_child_returns_its_dict_or_its_error_and_exits_accordingly(tmp_path):
    ok = procs.fork_call(
        lambda: {"pid": os.getpid(), "parent": os.getppid()}, tmp_path / "ok.json", on_error=failed
    )
    bad = procs.fork_call(lambda: 1 / 0, tmp_path / "bad.json", on_error=failed)
    assert ok.wait() and bad.wait()
    assert ok.exit_code == 0 and ok.result() == {"pid": ok.pid, "parent": os.getpid()}
    assert bad.exit_code == 1 and bad.result() == {"error": "ZeroDivisionError: division by zero"}


def test_a_child_that_dies_leaves_no_result_and_says_how_it_died(tmp_path):
    (tmp_path / "dead.json").write_text('{"stale": true}')  # a previous attempt's result must not be read
    dead = procs.fork_call(
        lambda: os.kill(os.getpid(), signal.SIGKILL), tmp_path / "dead.json", on_error=failed
    )
    assert dead.wait()
    assert dead.result() is None and dead.died() == "exit -9, signal SIGKILL"


def test_past_the_deadline_the_whole_tree_is_killed(tmp_path):
    pid_file = tmp_path / "grandchild.pid"

    def hang() -> dict:
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        pid_file.write_text(str(child.pid))
        time.sleep(600)
        return {}

    child = procs.fork_call(hang, tmp_path / "hang.json", on_error=failed, own_group=True)
    while not pid_file.exists():
        time.sleep(0.05)
    start = time.monotonic()
    assert child.wait(deadline=time.monotonic() + 0.5) is False
    assert time.monotonic() - start < 10
    grandchild = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while procs.alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not procs.alive(grandchild)
    assert child.result() is None and child.exit_code is not None and child.exit_code < 0


def test_own_group_makes_the_child_a_group_leader(tmp_path):
    led = procs.fork_call(
        lambda: {"pgid": os.getpgid(0)}, tmp_path / "led.json", on_error=failed, own_group=True
    )
    shared = procs.fork_call(lambda: {"pgid": os.getpgid(0)}, tmp_path / "shared.json", on_error=failed)
    assert led.wait() and shared.wait()
    assert led.result() == {"pgid": led.pid} and shared.result() == {"pgid": os.getpgid(0)}


def test_wait_first_returns_the_child_that_ends_first(tmp_path):
    slow = procs.fork_call(
        lambda: (time.sleep(1.0), {"who": "slow"})[1], tmp_path / "slow.json", on_error=failed
    )
    fast = procs.fork_call(lambda: {"who": "fast"}, tmp_path / "fast.json", on_error=failed)
    first = procs.wait_first([slow, fast])
    assert first is fast and fast.result() == {"who": "fast"} and slow.exit_code is None
    assert procs.wait_first([slow, fast]) is slow and slow.result() == {"who": "slow"}
