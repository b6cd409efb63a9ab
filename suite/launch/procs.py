"""Process trees: find every descendant, kill them all, and die with the parent; a function in a forked child.

A stage forks, the fork starts torchrun, torchrun starts workers, a worker may start more:
killing one process group is not enough when a stage or a worker makes its own. These
helpers walk the tree instead (ps works on Linux and macOS). `fork_call` is the one way the
suite runs Python in a child it supervises: the runner's stages and the fault drill's
supervisors both.
"""

from __future__ import annotations

import ctypes
import json
import os
import selectors
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from suite.results import atomic_write_text, dumps

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


def start_ticks(pid: int | str = "self") -> int | None:
    """When `pid` started, in clock ticks since boot (/proc/PID/stat field 22); None where /proc does not
    tell.

    With the pid it names one process for good: a pid recycled by another process has another start."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def wait_gone(pids: list[int], within_s: float, poll_s: float = 0.01) -> bool:
    """Wait until none of `pids` runs (a zombie counts as gone), at most `within_s`; whether they are gone."""
    deadline = time.monotonic() + within_s
    while any(alive(p) for p in pids):
        if time.monotonic() >= deadline:
            return False
        time.sleep(poll_s)
    return True


GONE_S = 10.0
"""How long kill_tree waits after its SIGKILL for the processes to be gone (the kernel ends them when next
scheduled; a busy machine takes longer)."""


def kill_tree(pid: int, grace_s: float = 2.0) -> None:
    """SIGTERM `pid` and all its descendants (SIGCONT for stopped ones), then SIGKILL what is left; returns
    once they are gone (at most GONE_S later), so that nothing of the tree writes a file after it."""
    victims = descendants(pid) + [pid]
    for sig in (signal.SIGTERM, signal.SIGCONT):
        for p in victims:
            try:
                os.kill(p, sig)
            except (ProcessLookupError, PermissionError):
                pass
    wait_gone([p for p in victims if p != pid], grace_s, poll_s=0.05)
    victims = descendants(pid) + victims
    for p in victims:
        try:
            os.kill(p, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    wait_gone([p for p in victims if p != pid], GONE_S)


# ---------------------------------------------------------------- a function in a forked child


@dataclass
class Forked:
    """A function running in a forked child; its result, a JSON object, lands in `result_path`."""

    pid: int
    result_path: Path
    exit_code: int | None = None
    """Set once the child has been reaped."""

    def poll(self) -> bool:
        """Whether the child has exited (reaping it)."""
        if self.exit_code is None:
            done, status = os.waitpid(self.pid, os.WNOHANG)
            if done:
                self.exit_code = os.waitstatus_to_exitcode(status)
        return self.exit_code is not None

    def wait(
        self,
        deadline: float | None = None,
        poll_s: float = 0.1,
        clock: Callable[[], float] = time.monotonic,
        before_kill: Callable[[], None] | None = None,
    ) -> bool:
        """Wait for the child; past `deadline` (on `clock`) call `before_kill` (the hang forensics) and kill
        its whole tree. False when it was killed so."""
        while not self.poll():
            if deadline is not None and clock() > deadline:
                if before_kill is not None:
                    before_kill()
                kill_tree(self.pid)
                _, status = os.waitpid(self.pid, 0)
                self.exit_code = os.waitstatus_to_exitcode(status)
                return False
            time.sleep(poll_s)
        return True

    def result(self) -> dict[str, Any] | None:
        """What the function returned (or its on_error made of its exception); None when the child died
        first."""
        return json.loads(self.result_path.read_text()) if self.result_path.exists() else None

    def died(self) -> str:
        """'exit 1' or 'exit -9, signal SIGKILL': how a child without a result ended."""
        code = self.exit_code
        return f"exit {code}" + (
            f", signal {signal.Signals(-code).name}" if code is not None and code < 0 else ""
        )


def fork_call(
    body: Callable[[], dict[str, Any]],
    result_path: Path,
    *,
    on_error: Callable[[BaseException], dict[str, Any]],
    own_group: bool = False,
) -> Forked:
    """Run `body()` in a forked child that dies with this process; its dict (or `on_error(exception)`) is
    written atomically to `result_path`, and the child exits 0 (1 after an exception) without returning.

    own_group: the child leads a new process group (the runner's stages: a terminal's ^C reaches the runner,
    which then kills the stage's tree itself).
    """
    result_path.unlink(missing_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    parent = os.getpid()
    pid = os.fork()
    if pid:
        return Forked(pid, result_path)
    code = 1
    try:
        if own_group:
            os.setpgid(0, 0)
        die_with_parent(expected_parent=parent)
        try:
            result = body()
            code = 0
        except BaseException as error:  # noqa: BLE001 - every failure of the child becomes its result
            result = on_error(error)
        atomic_write_text(result_path, dumps(result))
    finally:
        os._exit(code)


def wait_first(children: list[Forked], poll_s: float = 0.05) -> Forked:
    """Block until one of `children` exits; that one, reaped. Only these children are waited for: another
    child of this process (a Popen of its own) keeps its exit status for whoever waits for it."""
    waiting = [c for c in children if c.exit_code is None]
    if not waiting:
        raise ValueError("wait_first: every child has been reaped already")
    watch = selectors.DefaultSelector()
    try:  # Linux ≥ 5.3: woken by the exit itself; elsewhere polled
        for child in waiting:
            watch.register(os.pidfd_open(child.pid), selectors.EVENT_READ, child)
    except (AttributeError, OSError):
        pass
    try:
        while True:
            for child in waiting:
                if child.poll():
                    return child
            watch.select(timeout=poll_s) if watch.get_map() else time.sleep(poll_s)
    finally:
        for key in list(watch.get_map().values()):
            os.close(key.fd)
        watch.close()
