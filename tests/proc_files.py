"""What a live process holds open, read from /proc: the tests' way to see that a child is at work on a folder,
or that nothing of a killed run still holds its run directory."""

from __future__ import annotations

import os
from pathlib import Path


def holds_open(pid: int, folder: Path) -> bool:
    """`pid` has `folder` itself or a file beneath it open (False once it is gone, or where /proc cannot
    say)."""
    inside = str(Path(folder).resolve())
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:  # closed between the listing and the reading
            continue
        if target == inside or target.startswith(inside + "/"):
            return True
    return False
