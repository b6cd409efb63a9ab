"""Quoting for everything that reaches a remote shell.

Every remote command is built from an argv list and quoted here, then handed to `sh -c` so the
login shell of the rented host (bash, zsh, fish…) never parses our values itself:

    sh_command(["git", "-C", "/data/my dir", "checkout", "--detach", commit])
    → "sh -c 'git -C '\"'\"'/data/my dir'\"'\"' checkout --detach 4f1c…'"

A value such as `x; $(touch /tmp/pwned)` arrives as one literal argument, never as code.
"""

from __future__ import annotations

import shlex
from typing import Iterable


def given_flags(pairs: Iterable[tuple[str, object]]) -> list[str]:
    """`[flag, value]` for each pair whose value is set ('' / 0 / None leave the flag out): a command line's
    options."""
    return [word for flag, value in pairs if value for word in (flag, str(value))]


def quote(value: object) -> str:
    """One POSIX-shell word for `value`, whatever characters it holds."""
    return shlex.quote(str(value))


def join(argv: Iterable[object]) -> str:
    """A POSIX command line running exactly `argv`."""
    return " ".join(quote(a) for a in argv)


def sh_command(script: str | Iterable[object]) -> str:
    """`sh -c <script>`: a POSIX script (or an argv list) run by sh whatever the login shell is."""
    if not isinstance(script, str):
        script = join(script)
    return "sh -c " + quote(script)


# The host's python3 for the small host-side programs (job status, run lock, run listing): the
# session's, else the one on the PATH of the host's pid 1. On a container pod the image's Python
# (/opt/conda/bin) is only there: a non-interactive SSH session does not get the image's PATH.
HOST_PYTHON = [
    "sh",
    "-c",
    'p=$(command -v python3 || PATH=$(tr "\\0" "\\n" 2>/dev/null </proc/1/environ | sed -n "s/^PATH=//p") '
    'command -v python3) && exec "$p" "$@"; '
    'echo "no python3 on the host (session PATH nor the container PATH of pid 1): install python3" >&2; exit '
    "127",
    "python3",
]
"""Put before `-c PROGRAM ARGS…` in place of "python3"."""
