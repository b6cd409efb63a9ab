"""suite/launch/warm_python.py stands in for a module's process forked from the warm zygote: to whoever
started it (torchrun, for the fault drill's workers) it is that process — same argv, environment, cwd and
stdio, the same exit code or killing signal, signals passed on — and the module's process never outlives
it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import pytest

from suite.launch import forklaunch, procs

pytestmark = pytest.mark.dist

MODULE = "tests.dist.workers.stand_in"


@pytest.fixture(scope="module")
def command():
    zygote = forklaunch.warm_zygote()
    zygote.ping()
    return forklaunch.warm_run_module(zygote) + [MODULE]


def start(command, do: str, tmp_path) -> tuple[subprocess.Popen, dict]:
    repo = os.getcwd()
    proc = subprocess.Popen(
        [*command, "--do", do],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=repo,
        env={**os.environ, "CARDTIME_STAND_IN": str(tmp_path)},
        start_new_session=True,
    )
    proc.stdin.write("hello from the stand-in's stdin\n")
    proc.stdin.flush()
    return proc, json.loads(proc.stdout.readline())


def test_the_module_runs_warm_with_the_stand_ins_argv_environment_cwd_and_stdio(command, tmp_path):
    proc, seen = start(command, "exit3", tmp_path)
    assert proc.wait(timeout=30) == 3
    assert seen["argv"] == ["--do", "exit3"] and seen["cwd"] == os.getcwd()
    assert seen["marker"] == str(tmp_path) and seen["stdin"] == "hello from the stand-in's stdin"
    assert seen["torch"]  # forked from the zygote: torch already imported
    assert seen["pid"] != proc.pid


def test_a_module_killed_by_a_signal_is_a_stand_in_killed_by_it_and_an_exception_exits_1(command, tmp_path):
    proc, _ = start(command, "kill", tmp_path)
    assert proc.wait(timeout=30) == -signal.SIGKILL  # what torchrun sees of a worker that SIGKILLs itself
    proc, _ = start(command, "raise", tmp_path)
    assert proc.wait(timeout=30) == 1
    assert "ValueError: raised in the module" in proc.stderr.read()


def test_a_signal_to_the_stand_ins_group_reaches_the_module(command, tmp_path):
    proc, seen = start(command, "wait", tmp_path)
    os.killpg(proc.pid, signal.SIGTERM)  # how torchrun stops a worker
    assert proc.wait(timeout=30) == 7
    assert proc.stdout.readline().strip() == "got SIGTERM"
    assert not procs.alive(seen["pid"])


def test_the_module_dies_with_its_stand_in(command, tmp_path):
    proc, seen = start(command, "wait", tmp_path)
    assert procs.alive(seen["pid"])
    proc.kill()  # SIGKILL: nothing relayed, the socket's closing alone ends the module's process
    assert proc.wait(timeout=30) == -signal.SIGKILL
    deadline = time.monotonic() + 5
    while procs.alive(seen["pid"]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not procs.alive(seen["pid"])
