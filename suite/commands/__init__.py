"""One module per `python -m suite` command: each has add_parser(subparsers) setting func=main(args) -> exit
code. The top of the suite: a command may import any suite package and reports (rendering a run's report).
Imported only by suite/__main__.py.

Exit codes everywhere (README "Exit codes"): 0 success, 1 a "no" (a `fail` verdict, a rejected run, a
partial capture), 2 a usage error or unusable input — then one line on stderr, never a traceback.
"""

import sys
from pathlib import Path
from typing import Iterable


def record_last(file: Path | None, run_path: Path) -> None:
    """--record-last FILE: the run directory's path, replaced atomically. A FIFO or a device there is refused
    (suite.regular_files.NotRegularFile, an OSError) instead of blocking for ever on a FIFO nobody reads."""
    from suite.runfiles import atomic_write_text

    if file:
        atomic_write_text(Path(file), f"{run_path}\n")


def record_last_problem(file: Path, inputs: Iterable[Path] = ()) -> str | None:
    """Why --record-last FILE cannot be replaced, as one line: a FIFO or a device, a record of a run
    directory, one of the command's inputs (suite/output_target.py); None when it can."""
    from suite.output_target import overwrite_problem
    from suite.regular_files import check_replaceable

    if problem := overwrite_problem(file, inputs):
        return problem
    try:
        check_replaceable(file)
    except OSError as e:
        return str(e)
    return None


def usage_error(message: str) -> int:
    """One line on stderr, exit status 2, no traceback."""
    print(f"error: {message}", file=sys.stderr)
    return 2
