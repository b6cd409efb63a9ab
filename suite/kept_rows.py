"""A stage's rows kept as they are measured, so that a stage killed at its timeout (or crashing) loses none.

Two places hold them while the stage runs, both under raw/<stage>/:
  .stage-rows.jsonl   the rows the stage kept so far (`keep`), one JSON object a line, appended; when run()
                      returns, the runner replaces the file with run()'s whole list (suite/runner.py
                      ROWS_FILE)
  <tag>.out/          each launch's workers' rows.rank<N>.jsonl, rewritten on every emit
                      (suite/workloads/worker.py);
                      an OPEN file there says the stage has not kept that launch's rows yet

After a kill, `salvage` reads both: the kept rows, and the rows of every launch still open; a launch the
stage kept is read once, from the kept file, so no row counts twice. A line cut by the kill is dropped.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Iterable

from suite.results import Row, _nan_to_none, row_from_dict

LEDGER = ".stage-rows.jsonl"
"""The runner's ROWS_FILE: what run() returned, or (killed) what the stage kept of it."""
OPEN = "OPEN"
"""In a launch's out/ folder: its rows are not yet in the ledger."""


def keep(raw_dir: Path, rows: Iterable[Row], launch_dir: Path | None = None) -> None:
    """Append `rows` to the stage's ledger (flushed to disk before returning); `launch_dir`: the launch whose
    rows these are, closed so that a later salvage does not read its workers' files again."""
    lines = "".join(json.dumps(_nan_to_none(r.to_dict())) + "\n" for r in rows)
    if lines:
        with open(Path(raw_dir) / LEDGER, "a", encoding="utf-8") as f:
            f.write(lines)
            f.flush()
            os.fsync(f.fileno())
    if launch_dir is not None:
        (Path(launch_dir) / OPEN).unlink(missing_ok=True)


def reset(raw_dir: Path) -> None:
    """Before a stage runs (again): no ledger, no open launch, so nothing of an earlier attempt is
    salvaged."""
    raw_dir = Path(raw_dir)
    (raw_dir / LEDGER).unlink(missing_ok=True)
    for marker in raw_dir.glob(f"*/{OPEN}"):
        marker.unlink(missing_ok=True)


def open_launch(out_dir: Path) -> None:
    """Mark a launch's out/ folder open: a salvage reads its workers' rows until the stage keeps them."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / OPEN).write_text("rows not yet kept by the stage\n")


def read_lines(path: Path) -> list[Row]:
    """Every whole row in a jsonl file; a line a kill cut short (not JSON) is left out."""
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return []
    rows = []
    for line in text.splitlines():
        try:
            rows.append(row_from_dict(json.loads(line)))
        except (ValueError, TypeError):
            continue
    return rows


def salvage(raw_dir: Path) -> list[Row]:
    """The rows a stage measured before it was killed: those it kept, then each open launch's, rank 0
    first."""
    raw_dir = Path(raw_dir)
    rows = read_lines(raw_dir / LEDGER)
    for marker in sorted(raw_dir.glob(f"*/{OPEN}")):
        ranks = sorted(
            marker.parent.glob("rows.rank*.jsonl"), key=lambda p: int(p.stem.split("rank")[1] or 0)
        )
        for path in ranks:
            rows += read_lines(path)
    return rows


def salvage_note(rows: list[Row], stage: str) -> str:
    """The failure verdict's line about them."""
    if not rows:
        return "no rows had been measured"
    return f"the {len(rows)} rows measured before it are kept in results.parquet (raw/{stage}/{LEDGER})"
