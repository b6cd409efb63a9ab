"""Process trees: find every descendant, kill them all, and die with the parent.

A stage forks, the fork starts torchrun, torchrun starts workers, a worker may start more:
killing one process group is not enough when a stage or a worker makes its own. These
helpers walk the tree instead (ps works on Linux and macOS).
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time

PR_SET_PDEATHSIG = 1


def die_with_parent(sig: int = signal.SIGKILL, expected_parent: int | None = None) -> None:
    """Linux: have the kernel send `sig` to this process when its parent dies (no orphans after a kill -9).

    expected_parent closes the race where the parent died before this call (a worker spends seconds
    importing torch first): we were then already handed to another parent, the signal will never
    come, and we exit now. (Comparing with pid 1 would be wrong inside a container, where the
    suite itself may be pid 1.)
    """
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0)
    except OSError:
        return
    if expected_parent is not None and os.getppid() != expected_parent:
        os._exit(1)


def process_table() -> dict[int, int]:
    """pid → parent pid for every process visible to us."""
    out = subprocess.run(["ps", "-e", "-o", "pid=,ppid="], capture_output=True, text=True, check=False).stdout
    table = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0].isdigit() and parts[1].isdigit():
            table[int(parts[0])] = int(parts[1])
    return table


def descendants(pid: int) -> list[int]:
    """Every process below `pid`, children first."""
    table = process_table()
    children: dict[int, list[int]] = {}
    for child, parent in table.items():
        children.setdefault(parent, []).append(child)
    out, todo = [], list(children.get(pid, []))
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie is dead for our purposes
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return True


def kill_tree(pid: int, grace_s: float = 2.0) -> None:
    """SIGTERM `pid` and all its descendants (SIGCONT for stopped ones), then SIGKILL what is left."""
    victims = descendants(pid) + [pid]
    for sig in (signal.SIGTERM, signal.SIGCONT):
        for p in victims:
            try:
                os.kill(p, sig)
            except (ProcessLookupError, PermissionError):
                pass
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and any(alive(p) for p in victims if p != pid):
        time.sleep(0.05)
    for p in descendants(pid) + victims:
        try:
            os.kill(p, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
