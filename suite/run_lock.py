"""One `suite run` at a time per run directory: two `run --resume` of one directory would rerun the same
stages into the same files. The lock is flock(2) on the directory itself — no file to leave behind after a
kill, and the kernel drops it when the processes holding it end, however they end. Those are the runner and
what it forked (the stage children, the warm launcher and the ranks it forks share the descriptor): a runner
killed with SIGKILL keeps the directory locked until the last of them has gone (they end with it:
PR_SET_PDEATHSIG), so no `--resume` writes beside a dying rank of the run it resumes."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

_held: dict[str, int] = {}  # run directory → the descriptor whose lock this process holds, for its lifetime


class RunLockedError(RuntimeError):
    """Another process holds the run directory."""


def hold(run_dir: Path) -> None:
    """Take `run_dir`'s lock for the rest of this process; RunLockedError when another process holds it."""
    key = str(Path(run_dir).resolve())
    if key in _held:
        return
    fd = os.open(key, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise RunLockedError(
            f"{run_dir}: another `suite run` is writing this run directory; wait for it to end "
            "(or stop it), then --resume again"
        ) from None
    _held[key] = fd


def release(run_dir: Path) -> None:
    """Give the lock back (a test, or a caller that runs several run directories in one process)."""
    fd = _held.pop(str(Path(run_dir).resolve()), None)
    if fd is not None:
        os.close(fd)
