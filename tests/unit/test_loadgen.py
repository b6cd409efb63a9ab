"""The load generator (tests/loadgen.py) and make test-load's comparison (tests/load_verdicts.py): the loops
run, spin, end by themselves after max_s, and are gone when the block exits, even on an error; the comparison
names every verdict whose status is not the same in every run."""

from __future__ import annotations

import os
import time

import pytest

from tests.load_verdicts import differences
from tests.loadgen import busy_loops


def _spinning(pid: int, within_s: float = 60.0) -> bool:
    """The process's state is R (running or waiting for a core: never sleeping) in 20 looks in a row, once
    started (its interpreter's start-up reads files and may sleep); a loop that slept would show S."""
    deadline, streak = time.monotonic() + within_s, 0
    while time.monotonic() < deadline and streak < 20:
        state = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]
        streak = streak + 1 if state == "R" else 0
        time.sleep(0.01)
    return streak >= 20


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads /proc")
def test_the_loops_spin_and_are_killed_on_the_way_out_even_on_an_error():
    with pytest.raises(RuntimeError), busy_loops(2, max_s=60) as loops:
        assert len(loops) == 2 and all(p.poll() is None for p in loops)
        assert all(_spinning(p.pid) for p in loops)  # busy, not sleeping
        raise RuntimeError("the code under test failed")
    assert all(p.returncode is not None for p in loops)


def test_the_loops_end_by_themselves_after_max_s():
    with busy_loops(1, max_s=0.5) as (loop,):
        assert loop.wait(timeout=60) == 0  # ended on its own, not killed


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="max_s"), busy_loops(1, max_s=0):
        pass


def test_differences_name_each_verdict_not_the_same_in_every_run():
    runs = [
        {"pp.bubble.1f1b": "pass", "bandwidth.fit": "skip", "a": "pass"},
        {"pp.bubble.1f1b": "fail", "bandwidth.fit": "skip", "a": "pass"},
        {"pp.bubble.1f1b": "pass", "a": "pass"},
    ]
    assert differences(runs) == {
        "bandwidth.fit": ["skip", "skip", "-"],
        "pp.bubble.1f1b": ["pass", "fail", "pass"],
    }
    assert differences(runs[:1]) == {} and differences([]) == {}
