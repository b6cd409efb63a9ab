"""A stage's rows and expectations as display tables (strings only; the template just loops).

The expectation table puts each predicted value beside what was measured for it: the rows of the
same case and metric whose parameters agree with every parameter the expectation names; the
observed value is their median (over ranks and repeats), with how many rows it summarises.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from reports import fmt
from suite.results import PARAM_COLUMNS
from suite.values import is_missing

MAX_TABLE_ROWS = 40
"""Rows kept per table (folded ones too: the report stays small, a rehearsal's under 600 KB); the rest are in
results.csv / expectations.csv, which the report links."""
MAX_OPEN_ROWS = 30
"""A table longer than this is folded (<details>): a reader opens it, it never pushes the figures away."""

NUMERIC = {"value", "expected", "observed", "observed / expected", "n", *PARAM_COLUMNS} - {
    "dtype",
    "redop",
    "placement",
    "source",
    "algo",
    "overlap",
}


PROSE = {"text", "basis"}
"""Columns of free text (error lines with long paths): wrapped anywhere so the table fits the page."""


@dataclass(frozen=True)
class Cell:
    text: str
    cls: str = ""


@dataclass
class Table:
    caption: str
    headers: list[Cell]
    rows: list[list[Cell]]
    notes: list[str] = field(default_factory=list)
    folded: bool = False
    """Shown behind a one-line <details> summary; always so for more than MAX_OPEN_ROWS rows."""

    def __post_init__(self) -> None:
        self.folded = self.folded or len(self.rows) > MAX_OPEN_ROWS

    @property
    def summary(self) -> str:
        return f"{self.caption} ({len(self.rows)} row{'' if len(self.rows) == 1 else 's'})"


def make_table(
    caption: str,
    headers: list[str],
    rows: list[list[str]],
    total: int | None = None,
    where: str = "",
    folded: bool = False,
) -> Table:
    """A table of strings; numeric columns right-aligned; truncated to MAX_TABLE_ROWS with a note saying where
    the rest is."""
    classes = ["num" if h in NUMERIC else "prose" if h in PROSE else "" for h in headers]
    total = len(rows) if total is None else total
    shown = rows[:MAX_TABLE_ROWS]
    notes = []
    if total > len(shown):
        notes.append(f"first {len(shown)} of {total} rows shown; all of them are in {where}")
    return Table(
        caption=caption,
        headers=[Cell(h, c) for h, c in zip(headers, classes)],
        rows=[[Cell(text, c) for text, c in zip(row, classes)] for row in shown],
        notes=notes,
        folded=folded,
    )


def used_params(frame: pd.DataFrame) -> list[str]:
    """Parameter columns with at least one value in this frame (a stage uses a handful of the fourteen)."""
    return [c for c in PARAM_COLUMNS if c in frame.columns and frame[c].notna().any()]


def rows_table(rows: pd.DataFrame) -> Table:
    params = used_params(rows)
    has_text = "text" in rows.columns and rows["text"].notna().any()
    headers = ["case", "metric", "value", "unit", *params, *(["text"] if has_text else [])]
    body = [
        [fmt.cell(h, record.get(h)) for h in headers]
        for record in rows.head(MAX_TABLE_ROWS).to_dict("records")
    ]
    return make_table(
        "Measurements", headers, body, total=len(rows), where="results.csv / results.parquet", folded=True
    )


def expectation_table(expectations: pd.DataFrame, rows: pd.DataFrame) -> Table:
    params = used_params(expectations)
    headers = ["case", "metric", *params, "expected", "observed", "n", "unit", "observed / expected", "basis"]
    body = []
    for e in expectations.head(MAX_TABLE_ROWS).to_dict("records"):
        values = matching_values(e, rows)
        observed = float(values.median()) if len(values) else float("nan")
        ratio = observed / e["value"] if len(values) and e["value"] not in (0, None) else float("nan")
        body.append(
            [
                fmt.cell("case", e["case"]),
                fmt.cell("metric", e["metric"]),
                *[fmt.cell(p, e.get(p)) for p in params],
                fmt.number(e["value"]),
                fmt.number(observed) if len(values) else "not measured",
                str(len(values)),
                fmt.cell("unit", e["unit"]),
                fmt.number(ratio) if len(values) else "",
                fmt.cell("basis", e.get("basis")),
            ]
        )
    return make_table(
        "Expected (before the run) and observed",
        headers,
        body,
        total=len(expectations),
        where="expectations.csv",
        folded=True,
    )


def matching_values(expectation: dict, rows: pd.DataFrame) -> pd.Series:
    """Finite values of the rows this expectation predicts: same case and metric, and every parameter it
    names."""
    if rows.empty:
        return pd.Series([], dtype="float64")
    mask = (rows["case"] == expectation["case"]) & (rows["metric"] == expectation["metric"])
    for column in PARAM_COLUMNS:
        value = expectation.get(column)
        if is_missing(value):
            continue
        if column == "source" and value not in set(rows["source"].dropna()):
            continue  # the prediction's own source ("model", "α-β"): it names no measuring tool to match
        mask &= rows[column] == value
    values = rows.loc[mask.fillna(False), "value"].astype("float64")
    return values[values.notna()]
