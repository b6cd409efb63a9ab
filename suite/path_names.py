"""Paths whose names are not UTF-8, refused in one line before anything is written.

A run records its paths in UTF-8 JSON, Parquet and HTML. A folder named in latin-1 (`caf\\xe9`, as an old
archive or a Windows share unpacks it) reaches Python as a lone surrogate, which none of those writers take:
the run died half-written with a traceback and `suite check` then called the healthy part "missing". Every
path a command is given (and the folder it runs in) is asked here first; a file inside a folder being ingested
is left unused with the same reason (suite/ingest/inputs.py).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Iterable


def shown(path: Path | str) -> str:
    """The name as its bytes read, undecodable ones as \\xNN: printable, and the same every time."""
    return os.fsencode(str(path)).decode("utf-8", "backslashreplace")


def not_utf8_problem(path: Path | str) -> str | None:
    """Why cardtime cannot record `path` (its absolute form: a relative name in a latin-1 folder fails
    too)."""
    text = os.path.abspath(os.fspath(path))
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return (
            f"{shown(text)}: the name is not UTF-8; rename it (or use another folder): cardtime records "
            "every path in UTF-8 files"
        )
    return None


def given_paths(args: argparse.Namespace) -> Iterable[Path]:
    """The paths among a command's parsed options, single or listed."""
    for value in vars(args).values():
        for item in value if isinstance(value, (list, tuple)) else (value,):
            if isinstance(item, Path):
                yield item


def args_problem(args: argparse.Namespace) -> str | None:
    """The first path option cardtime could not record (a relative one read from the working folder)."""
    return next(filter(None, map(not_utf8_problem, given_paths(args))), None)
