"""One module per `python -m suite` command: each has add_parser(subparsers) setting func=main(args) -> exit code.
The top of the suite: a command may import any suite package and reports (rendering a run's report).
Imported only by suite/__main__.py.

Exit codes everywhere (README "Exit codes"): 0 success, 1 a "no" (a `fail` verdict, a rejected run, a
partial capture), 2 a usage error or unusable input — then one line on stderr, never a traceback.
"""

import sys
from pathlib import Path


def record_last(file: Path | None, run_path: Path) -> None:
    """--record-last FILE: the run directory's path, replaced atomically. A FIFO or a device there is refused
    (suite.regular_files.NotRegularFile, an OSError) instead of blocking for ever on a FIFO nobody reads."""
    from suite.runfiles import atomic_write_text

    if file:
        atomic_write_text(Path(file), f"{run_path}\n")


def not_regular_target(file: Path) -> str | None:
    """Why `file` cannot be replaced (a FIFO, a device), as one line; None when it can."""
    from suite.regular_files import check_replaceable

    try:
        check_replaceable(file)
    except OSError as e:
        return str(e)
    return None


def usage_error(message: str) -> int:
    """One line on stderr, exit status 2, no traceback."""
    print(f"error: {message}", file=sys.stderr)
    return 2
