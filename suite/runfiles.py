"""A run directory's files: written atomically, read so that a damaged one raises one error naming it.

Writers replace a file in one rename (write a temporary file beside it, fsync, rename), so a reader
or a kill sees the old file or the new one, never half.

A run directory travels: it is fetched from a rented box, copied, archived, opened months later. A
file cut short by a full disk, a half-finished copy or an editor must not end in a traceback from
json, pyarrow or csv; every reader here raises RunDirError instead, whose message says which file,
what is wrong with it and what to do.
"""

from __future__ import annotations

import csv
import io
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from suite import strict_json
from suite.regular_files import check_replaceable, not_regular_problem

REDO = "rerun the run (python -m suite run --out NEW_DIR) or restore the file from the run's archive"


class RunDirError(RuntimeError):
    """A file of a run directory that cannot be read as the schema says; the message names the file."""

    def __init__(self, file: Path, problem: str, fix: str = REDO) -> None:
        self.file = Path(file)
        self.problem = problem
        super().__init__(f"{self.file}: {problem}" + (f"; {fix}" if fix else ""))


def atomic_write_text(path: Path, text: str) -> None:
    """Write `text` to `path` so that a reader (or a kill) sees the old file or the new one, never half."""
    check_replaceable(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_with(path: Path, writer) -> None:
    """`writer(temporary_path)` writes the file; it then replaces `path` in one rename."""
    check_replaceable(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        writer(tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_text(file: Path) -> str:
    """The file's text; RunDirError when it is missing, not a file, unreadable or not UTF-8."""
    _refuse_non_regular(file)
    try:
        return Path(file).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise RunDirError(file, "missing") from None
    except IsADirectoryError:
        raise RunDirError(file, "is a directory, not a file") from None
    except PermissionError:
        raise RunDirError(
            file, "not readable (permission denied)", fix="check the file's owner and mode"
        ) from None
    except UnicodeDecodeError as e:
        raise RunDirError(
            file, f"not UTF-8 text ({e.reason} at byte {e.start}): the file is damaged"
        ) from None
    except OSError as e:
        raise RunDirError(file, f"cannot be read ({e.strerror or e})") from None


def read_json_object(file: Path) -> dict[str, Any]:
    """A JSON file holding one object; RunDirError when it is truncated, damaged or holds something else."""
    text = read_text(file)
    if not text.strip():
        raise RunDirError(file, "empty (the write was interrupted or the copy is incomplete)")
    try:
        data = strict_json.loads(text)
    except json.JSONDecodeError as e:
        cut = "; it ends mid-document: truncated" if not text.rstrip().endswith(("}", "]")) else ""
        raise RunDirError(file, f"not valid JSON ({e.msg}: line {e.lineno}, column {e.colno}{cut})") from None
    # NaN, 1e400, a 5000-digit integer, 100 000-deep nesting: nothing the suite writes
    except ValueError as e:
        raise RunDirError(file, f"holds what no run writes ({e})") from None
    if not isinstance(data, dict):
        raise RunDirError(file, f"holds a JSON {type(data).__name__}, not an object")
    return data


def read_parquet(file: Path, columns: tuple[str, ...]):
    """A parquet table with (at least) `columns`; RunDirError when it is missing, not parquet or lacks
    columns."""
    import pandas as pd

    file = Path(file)
    if not file.exists():
        raise RunDirError(file, "missing")
    _refuse_non_regular(file)
    try:
        frame = pd.read_parquet(file)
    # pyarrow raises ArrowInvalid, OSError, ValueError… for a damaged file
    except Exception as e:  # noqa: BLE001
        raise RunDirError(file, f"not a readable parquet file ({_first_sentence(e)})") from None
    absent = [c for c in columns if c not in frame.columns]
    if absent:
        raise RunDirError(file, f"lacks the column(s) {', '.join(absent)}")
    return frame


def read_csv_records(file: Path, columns: tuple[str, ...]) -> list[dict[str, str]]:
    """A CSV file's rows as dicts; RunDirError when it is missing, damaged or its header lacks `columns`."""
    text = read_text(file)
    try:
        reader = csv.DictReader(io.StringIO(text, newline=""))
        header = reader.fieldnames or []
        absent = [c for c in columns if c not in header]
        if absent:
            raise RunDirError(file, f"its header lacks the column(s) {', '.join(absent)}")
        return list(reader)
    except csv.Error as e:
        raise RunDirError(file, f"not valid CSV ({e})") from None


def _refuse_non_regular(file: Path) -> None:
    """A FIFO or a device in a run directory's place would block or never end: refused by its kind."""
    problem = not_regular_problem(file)
    if problem and not Path(file).is_dir():
        raise RunDirError(file, problem.split(":")[0], fix="the run directory is damaged; restore the file")


def _first_sentence(error: Exception) -> str:
    """pyarrow's message without the path it repeats: 'Parquet magic bytes not found in footer'."""
    text = (str(error).splitlines() or [type(error).__name__])[0]
    text = text.split("': ", 1)[-1]
    return text.split(". ", 1)[0].rstrip(".")
