"""Paths whose names are not UTF-8 or hold a newline: refused in one line before anything is written.

A run records its paths in UTF-8 JSON, Parquet and HTML. A folder named in latin-1 (`caf\\xe9`, as an old
archive or a Windows share unpacks it) reaches Python as a lone surrogate, which none of those writers take:
the run died half-written with a traceback and `suite check` then called the healthy part "missing". Every
path a command is given (and the folder it runs in) is asked here first; a file inside a folder being ingested
is left unused with the same reason (suite/ingest/inputs.py).

A name holding a newline would print as two lines: a run folder named `x\\nbox verdict: ACCEPT` would add a
line of cardtime's own to what it prints. Refused the same way. (Other control characters are shown escaped
wherever a name is printed or recorded: suite/inert.py.)
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Iterable


def shown(path: Path | str) -> str:
    """The name as its bytes read, undecodable ones and control characters as \\xNN: printable on one line,
    and the same every time."""
    text = os.fsencode(str(path)).decode("utf-8", "backslashreplace")
    return "".join(f"\\x{ord(c):02x}" if _is_control(c) else c for c in text)


def _is_control(c: str) -> bool:
    return ord(c) < 0x20 or ord(c) == 0x7F


NOT_UTF8 = "not UTF-8"


def name_fault(path: Path | str) -> str | None:
    """What in `path`'s name cardtime cannot record or print ("not UTF-8", "a newline"), judged on
    its absolute form (a relative name in a latin-1 folder fails too); None for a good name."""
    text = os.path.abspath(os.fspath(path))
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return NOT_UTF8
    if "\n" in text:
        return "a newline"
    return None


def name_problem(path: Path | str) -> str | None:
    """One line on why cardtime refuses `path`, the name shown printable; None for a good name."""
    fault = name_fault(path)
    text = shown(os.path.abspath(os.fspath(path)))
    if fault == NOT_UTF8:
        return (
            f"{text}: the name is not UTF-8; rename it (or use another folder): cardtime records every path "
            "in UTF-8 files"
        )
    return fault and f"{text}: the name holds {fault}; rename it: cardtime prints every path on one line"


def given_paths(args: argparse.Namespace) -> Iterable[Path]:
    """The paths among a command's parsed options, single or listed."""
    for value in vars(args).values():
        for item in value if isinstance(value, (list, tuple)) else (value,):
            if isinstance(item, Path):
                yield item


def args_problem(args: argparse.Namespace) -> str | None:
    """The first path option cardtime could not record (a relative one read from the working folder)."""
    return next(filter(None, map(name_problem, given_paths(args))), None)
