"""Where a command may write its output: never onto a run directory's own records, nor onto its inputs.

`reports RUN -o RUN/manifest.json` once replaced the run's manifest with HTML and the run no longer read;
`--record-last` pointed at a capture being ingested would replace the capture. So every output option (the
report's and the comparison's `-o`, `--record-last`) asks `overwrite_problem` first, before any work, and is
refused in one line naming the file.

A run directory is a folder holding a manifest.json. Inside one, only its report (report.html) may be written;
a new file of another name is allowed, but never a record's name (manifest, results, expectations, verdicts),
anything under raw/ (the untouched captures), or a file already there.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable

from suite.results import RunDir

MANIFEST, REPORT = RunDir.MANIFEST, RunDir.REPORT
RECORDS = frozenset(
    {MANIFEST, RunDir.EXPECTATIONS, RunDir.RESULTS_PARQUET, RunDir.RESULTS_CSV, RunDir.VERDICTS, "raw"}
)


def overwrite_problem(target: Path, inputs: Iterable[Path] = ()) -> str | None:
    """Why writing `target` would destroy what a run or this command reads, in one line; None when it may."""
    where = _real(target)
    for given in inputs:
        source = _real(given)
        if where == source or (
            source.is_dir() and source in where.parents and where.is_file() and _enclosing_run(where) is None
        ):
            return f"{target} is one of this command's inputs: write the output to another file"
    run = _enclosing_run(where)
    if run is None:
        return None
    inside = where.relative_to(run)
    if inside == Path(REPORT):
        return None
    if inside.parts[0] in RECORDS or where.exists():
        return (
            f"{target} is a file of the run directory {run} ({inside}): its records and raw captures are "
            f"never "
            f"overwritten; write the output outside the run directory, or to {run / REPORT}"
        )
    return None


def _real(path: Path) -> Path:
    """The path as the file system will resolve it (symbolic links followed, `..` folded), even where it does
    not exist yet."""
    return Path(os.path.realpath(Path(path).expanduser()))


def _enclosing_run(where: Path) -> Path | None:
    for folder in where.parents:
        if (folder / MANIFEST).is_file():
            return folder
    return None
