"""Files the suite reads or replaces must be regular files: a FIFO blocks a reader until some writer comes
(for ever, when none does), a device such as /dev/zero never ends, and an atomic rename onto /dev/null as root
would replace the device node itself. Each is refused here, by its kind, before anything is opened."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

# Above any real capture or run-directory record (200 MB inputs parse in seconds); a bound, not a target.
MAX_READ_BYTES = 2 << 30


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISDIR(mode):
        return "a directory"
    return "not a regular file"


def not_regular_problem(path: Path | str) -> str | None:
    """Why `path` (which exists) cannot be read as a file: its kind, or a size over MAX_READ_BYTES; None if it
    can. A missing path is None: the caller's own open says "no such file"."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return f"{_kind(st.st_mode)}, not a regular file: save the output to a file and name that"
    if st.st_size > MAX_READ_BYTES:
        return (
            f"{st.st_size} bytes, over the {MAX_READ_BYTES >> 30} GiB the suite reads: name the capture "
            f"itself"
        )
    return None


class NotRegularFile(OSError):
    """A path that is not a regular file, where one is read or replaced; strerror says what it is."""

    def __init__(self, path: Path | str, problem: str) -> None:
        super().__init__(errno.EINVAL, problem, str(path))

    def __str__(self) -> str:  # "PATH: what it is", the one line an `error:` prints
        return f"{self.filename}: {self.strerror}"


def check_replaceable(path: Path | str) -> None:
    """Raise NotRegularFile when `path` exists and is not a regular file: a rename would replace a device or
    FIFO."""
    try:
        st = os.lstat(path)
    except OSError:
        return
    if not stat.S_ISREG(st.st_mode) and not stat.S_ISLNK(st.st_mode):
        raise NotRegularFile(
            path,
            f"{_kind(st.st_mode)}: the output must be a regular file; name a file path (-o runs/report.html)",
        )
