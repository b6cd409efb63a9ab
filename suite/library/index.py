"""The library's index: one SQLite file (runs/library.sqlite, or CARDTIME_LIBRARY) of summaries and figures.

    with opened(path) as db:
        add(db, summarize(run_dir), origin="ingested", path=str(run_dir))
        rows = listed(db, gpu_model="H100 SXM")

SQLite, not DuckDB: it is in Python's standard library (nothing to install on a laptop or a box), one file,
transactional (an interrupted add leaves the library as it was), and what it indexes is small: a summary
and its headline figures per run. The rows themselves stay in each run's parquet; the library ranks boxes,
it does not scan measurements.
"""

from __future__ import annotations

import json
import os
import sqlite3
import statistics
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping

NAME = "library.sqlite"
ENV = "CARDTIME_LIBRARY"


def default_path(runs_dir: Path | None = None) -> Path:
    """The library: CARDTIME_LIBRARY where set (one library for runs kept in several folders), else
    library.sqlite beside the runs (runs/ by default)."""
    return Path(os.environ.get(ENV) or Path(runs_dir or "runs") / NAME)


SCHEMA = """
create table if not exists runs (
    key text primary key,
    digest text not null,
    origin text not null,
    path text,
    date text,
    gpu_model text,
    gpu_count integer,
    box_verdict text,
    provider text,
    region text,
    price_per_hour real,
    summary text not null
);
create table if not exists figures (
    key text not null references runs(key) on delete cascade,
    metric text not null,
    value real not null,
    primary key (key, metric)
);
create index if not exists runs_by_model on runs (gpu_model, date);
"""


class Duplicate(ValueError):
    """The library already holds this run."""


@contextmanager
def opened(path: Path) -> Iterator[sqlite3.Connection]:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(path)
    db.row_factory = sqlite3.Row
    try:
        db.execute("pragma foreign_keys = on")
        db.executescript(SCHEMA)
        with db:  # one transaction: committed on success, rolled back on an error
            yield db
    finally:
        db.close()


def add(
    db: sqlite3.Connection, summary: Mapping[str, Any], *, origin: str, path: str = "", replace: bool = True
) -> None:
    """Index a summary. The same run again replaces its entry (labels given later, a re-ingest; a label not
    given again is kept), unless `replace` is False (an import: a duplicate is refused, raising Duplicate)."""
    found = db.execute("select origin, summary from runs where key = ?", (summary["key"],)).fetchone()
    if found and not replace:
        raise Duplicate(f"already in the library (run {summary['key']}, {found['origin']})")
    labels = {
        **((json.loads(found["summary"]).get("labels") or {}) if found else {}),
        **(summary.get("labels") or {}),
    }
    if labels != (summary.get("labels") or {}):
        from suite.library.summary import digest

        summary = {**summary, "labels": labels}
        summary["digest"] = digest(summary)
    db.execute("delete from runs where key = ?", (summary["key"],))
    db.execute(
        "insert into runs values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            summary["key"],
            summary["digest"],
            origin,
            path,
            summary.get("date", ""),
            summary.get("gpu_model"),
            summary.get("gpu_count"),
            summary.get("box_verdict"),
            labels.get("provider"),
            labels.get("region"),
            labels.get("price_per_hour"),
            json.dumps(summary, sort_keys=True),
        ),
    )
    db.executemany(
        "insert into figures values (?, ?, ?)",
        [(summary["key"], metric, float(value)) for metric, value in summary.get("figures", {}).items()],
    )


def listed(db: sqlite3.Connection, gpu_model: str | None = None, verdict: str | None = None) -> list[dict]:
    """Every run, oldest first, with its figures; filtered by model and box verdict when given."""
    where, args = [], []
    if gpu_model:
        where.append("gpu_model = ?")
        args.append(gpu_model)
    if verdict:
        where.append("box_verdict = ?")
        args.append(verdict.upper())
    sql = "select summary, origin, path from runs" + (" where " + " and ".join(where) if where else "")
    out = []
    for row in db.execute(sql + " order by date, key", args):
        summary = json.loads(row["summary"])
        out.append({**summary, "origin": row["origin"], "path": row["path"]})
    return out


def values(
    db: sqlite3.Connection, gpu_model: str, metric: str, *, excluding: str = "", gpu_count: int | None = None
) -> list[float]:
    """One figure over every run of a model in the library (but `excluding`'s; of `gpu_count` GPUs only when
    given)."""
    sql = (
        "select f.value from figures f join runs r on r.key = f.key "
        "where r.gpu_model = ? and f.metric = ? and r.key != ?"
    )
    args: list[Any] = [gpu_model, metric, excluding]
    if gpu_count is not None:
        sql += " and r.gpu_count = ?"
        args.append(gpu_count)
    return [row[0] for row in db.execute(sql + " order by f.value", args)]


@dataclass(frozen=True)
class Learned:
    """What `make plan` takes from the library for a GPU model: medians over its runs, and how many."""

    alpha_s: float | None = None
    beta_Bps: float | None = None
    fits: int = 0
    """Runs of the model and GPU count with the bandwidth stage's α-β fit."""
    step_s: float | None = None
    steps: int = 0
    """Runs of the model and the plan's profile with a measured baseline step (one card)."""

    def line(self, model: str, library: Path) -> str:
        said = []
        if self.fits:
            said.append(f"α and β: medians of {self.fits} earlier run(s)")
        if self.steps:
            said.append(f"the one-card step time: median of {self.steps}")
        return f"from the library ({library}), {model}: " + "; ".join(said)


def learned(library: Path, gpu_model: str, gpu_count: int, profile: str) -> Learned | None:
    """The medians of the library's runs of this model for `make plan`: α and β of those with this many GPUs,
    the baseline's step time of those run with this profile (its model); None without a library or such
    runs."""
    if not Path(library).is_file():
        return None
    with opened(library) as db:
        alphas = values(db, gpu_model, "alpha", gpu_count=gpu_count)
        betas = values(db, gpu_model, "beta", gpu_count=gpu_count)
        steps = [
            s["figures"]["baseline.step"]
            for s in listed(db, gpu_model=gpu_model)
            if s.get("profile") == profile and "baseline.step" in s["figures"]
        ]
    fits = min(len(alphas), len(betas))
    if not fits and not steps:
        return None
    return Learned(
        alpha_s=statistics.median(alphas) * 1e-6 if fits else None,
        beta_Bps=statistics.median(betas) * 1e9 if fits else None,
        fits=fits,
        step_s=statistics.median(steps) if steps else None,
        steps=len(steps),
    )


def add_run(
    run_dir: Path,
    *,
    origin: str,
    library: Path | None = None,
    labels: Mapping[str, Any] | None = None,
    view=None,
) -> str:
    """Index a run directory in `library` (default: default_path() beside the run); one line saying where, or
    why it could not (an index is never worth failing a fetch or an ingest for); `view`: the run, read."""
    from suite.library.summary import summarize

    run_dir = Path(run_dir)
    library = Path(library) if library else default_path(run_dir.parent)
    try:
        summary = summarize(run_dir, labels, view)
        with opened(library) as db:
            add(db, summary, origin=origin, path=str(run_dir))
    except (OSError, ValueError, sqlite3.Error) as e:
        return f"library: {run_dir.name} not indexed ({e}); `python -m suite library add {run_dir}` retries"
    return (
        f"library: indexed in {library} ({summary['gpu_model'] or 'no GPU model'}, {summary['box_verdict']})"
    )
