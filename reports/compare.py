"""Runs side by side: verdicts in columns, each metric as a ratio to the first run, figures overlaid.

    python -m reports compare runs/box-a runs/box-b -o runs/compare.html
    make compare RUNS="runs/box-a runs/box-b"

The first run is the baseline: every other run's metric is shown as run ÷ baseline. A ratio is
marked when the difference exceeds the run-to-run noise: both runs have repeats (the `repeat`
column) and the ranges [min, max] over their repeats do not overlap. Without repeats the noise is
unknown and nothing is marked (the ratio is still shown).

A stage is compared only when its code and the schema are the same in both runs: the schema
version, and the stage's `stage_code` hash from the manifest (or, for runs that predate it, the
git commit with a clean tree). Otherwise it is marked "not comparable" and no ratio is computed.
"""

from __future__ import annotations

import string
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from reports import figures as figure_modules
from reports import fmt, identity, overlay
from reports.render import render_template
from reports.report import Link, anchor, summary
from reports.runview import RunView, load_run
from reports.tables import Cell, Table
from suite.results import PARAM_COLUMNS, SCHEMA_VERSION, RunDirError, SchemaError
from suite.runfiles import read_json_object
from suite.stages import ORDER
from suite.values import is_finite_number

# A metric's identity across runs: everything but the value, the rank and the repeat.
MAX_COMPARED_ROWS = 100
"""Metrics kept per stage in a comparison (the marked ones first): what is compared is the point, unlike a
run's folded sample of its measurements (tables.MAX_TABLE_ROWS)."""
KEY_COLUMNS = ("case", "metric", "unit", *[c for c in PARAM_COLUMNS if c not in ("rank", "repeat", "t")])


@dataclass
class ComparedRun:
    label: str
    path: Path
    manifest: dict[str, Any]
    view: RunView | None
    unreadable: str = ""
    """Why this run's records could not be read (another schema version); empty when they could."""

    @property
    def run_id(self) -> str:
        return str(self.manifest.get("run_id") or self.path.name)


def open_run(label: str, path: Path) -> ComparedRun:
    """Load a run; one of another schema version is kept with its manifest only and compared with nothing."""
    path = Path(path)
    try:
        view = load_run(path)
    except SchemaError as e:
        try:
            manifest = read_json_object(path / "manifest.json")
        # the verdicts are of another schema and the manifest is damaged: show the path only
        except RunDirError:
            manifest = {}
        return ComparedRun(label, path, manifest, None, unreadable=str(e).split(";")[0])
    return ComparedRun(label, path, view.manifest, view)


def comparable(base: ComparedRun, other: ComparedRun, stage: str) -> str:
    """'' when the stage can be compared between the two runs, else why not (shown as 'not comparable: …')."""
    versions = base.manifest.get("schema_version"), other.manifest.get("schema_version")
    if versions[0] != versions[1] or base.unreadable or other.unreadable:
        return f"schema version {versions[0]} vs {versions[1]} (this cardtime reads {SCHEMA_VERSION})"
    codes = [((r.manifest.get("stages") or {}).get(stage) or {}).get("stage_code") for r in (base, other)]
    if all(codes):
        return "" if codes[0] == codes[1] else f"stage code differs ({codes[0][:12]} vs {codes[1][:12]})"
    gits = [r.manifest.get("git") or {} for r in (base, other)]
    commits = [g.get("commit") for g in gits]
    if commits[0] != commits[1]:
        return (
            f"stage code not recorded and commits differ ({str(commits[0])[:12]} vs {str(commits[1])[:12]})"
        )
    if any(g.get("dirty") is not False for g in gits):
        return "stage code not recorded and a tree had uncommitted changes"
    return ""


def aggregate(rows: pd.DataFrame) -> pd.DataFrame:
    """Per metric key: median, min and max over repeats (each repeat first reduced to the median over ranks),
    and n."""
    rows = rows[rows["value"].notna()]
    if rows.empty:
        return pd.DataFrame(columns=[*KEY_COLUMNS, "median", "min", "max", "n"])
    keys = list(KEY_COLUMNS)
    frame = rows[[*keys, "repeat", "value"]].copy()
    for column in keys + ["repeat"]:
        frame[column] = frame[column].astype("string").fillna("")
    per_repeat = frame.groupby([*keys, "repeat"], sort=False, dropna=False)["value"].median().reset_index()
    grouped = per_repeat.groupby(keys, sort=False, dropna=False)["value"]
    return grouped.agg(median="median", min="min", max="max", n="count").reset_index()


def exceeds_noise(a: pd.Series, b: pd.Series) -> bool:
    """Both have repeats and their [min, max] ranges are disjoint: the difference is larger than the noise."""
    if a["n"] < 2 or b["n"] < 2:
        return False
    return bool(b["min"] > a["max"] or b["max"] < a["min"])


@dataclass
class StageComparison:
    anchor: str
    heading: str
    notes: list[str] = field(default_factory=list)
    figures: list[figure_modules.Image] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    marked: int = 0


def metric_table(stage: str, runs: list[ComparedRun], others: list[ComparedRun]) -> tuple[Table | None, int]:
    """case/metric/parameters | baseline value | per other run: value, ratio (⚑ beyond noise). Marked rows
    first."""
    base = aggregate(runs[0].view.stage_rows(stage))
    merged = base.rename(columns={"median": "v0", "min": "min0", "max": "max0", "n": "n0"})
    for i, run in enumerate(others, start=1):
        agg = aggregate(run.view.stage_rows(stage)).rename(
            columns={"median": f"v{i}", "min": f"min{i}", "max": f"max{i}", "n": f"n{i}"}
        )
        merged = merged.merge(agg, on=list(KEY_COLUMNS), how="outer", sort=False)
    if merged.empty:
        return None, 0
    params = [c for c in KEY_COLUMNS[3:] if (merged[c].fillna("") != "").any()]
    headers = ["case", "metric", *params, "unit", f"{runs[0].label}"]
    for run in others:
        headers += [run.label, f"{run.label}/{runs[0].label}"]
    body, marked_rows = [], []
    for record in merged.to_dict("records"):
        cells = [Cell(str(record["case"])), Cell(str(record["metric"]))]
        cells += [Cell(fmt.cell(p, record[p]), "num") for p in params]
        cells += [Cell(str(record["unit"])), Cell(value_text(record, 0), "num")]
        any_mark = False
        for i, run in enumerate(others, start=1):
            base, value = record.get("v0"), record.get(f"v{i}")
            ratio = (
                value / base if is_finite_number(base) and is_finite_number(value) and base else float("nan")
            )
            mark = is_finite_number(ratio) and exceeds_noise(_stats(record, 0), _stats(record, i))
            any_mark |= mark
            cells += [
                Cell(value_text(record, i), "num"),
                Cell(
                    (fmt.number(ratio) if is_finite_number(ratio) else "—") + (" ⚑" if mark else ""),
                    "num marked" if mark else "num",
                ),
            ]
        (marked_rows if any_mark else body).append(cells)
    rows = marked_rows + body
    classes = ["", "", *["num"] * len(params), "", "num"] + ["num", "num"] * len(others)
    table = Table(
        caption="Metrics: median over repeats; ratio to the first run (⚑: beyond run-to-run noise)",
        headers=[Cell(h, c) for h, c in zip(headers, classes)],
        rows=rows[:MAX_COMPARED_ROWS],
    )
    if len(rows) > MAX_COMPARED_ROWS:
        table.notes.append(f"first {MAX_COMPARED_ROWS} of {len(rows)} metrics shown (marked ones first)")
    if not any(_has_repeats(merged, i) for i in range(1, len(others) + 1)) or not _has_repeats(merged, 0):
        table.notes.append(
            "no repeats in at least one run: the run-to-run noise is unknown, so no ratio is marked"
        )
    return table, len(marked_rows)


def value_text(record: dict, i: int) -> str:
    if not is_finite_number(record.get(f"v{i}")):
        return "—"
    text = fmt.number(record[f"v{i}"])
    n = record.get(f"n{i}")
    if is_finite_number(n) and n >= 2 and record[f"v{i}"]:
        spread = (record[f"max{i}"] - record[f"min{i}"]) / 2 / abs(record[f"v{i}"]) * 100
        text += f" ±{spread:.2g}%"
    return text


def _stats(record: dict, i: int) -> pd.Series:
    return pd.Series(
        {
            "n": record.get(f"n{i}") if is_finite_number(record.get(f"n{i}")) else 0,
            "min": record.get(f"min{i}"),
            "max": record.get(f"max{i}"),
        }
    )


def _has_repeats(merged: pd.DataFrame, i: int) -> bool:
    column = merged.get(f"n{i}")
    return column is not None and bool((column.fillna(0) >= 2).any())


def verdict_matrix(runs: list[ComparedRun], stages: list[str]) -> Table:
    position = {s: i for i, s in enumerate(stages)}
    by_run = [{v.id: v for v in (r.view.verdicts if r.view else [])} for r in runs]
    ids = sorted(
        {i for verdicts in by_run for i in verdicts},
        key=lambda i: (position.get(i.split(".")[0], len(stages)), i),
    )
    headers = [Cell("verdict")] + [Cell(f"{r.label}: {r.run_id}") for r in runs]
    rows = []
    for vid in ids:
        row = [Cell(vid)]
        for verdicts in by_run:
            v = verdicts.get(vid)
            row.append(Cell(v.status, f"badge {v.status}") if v else Cell("—", "badge none"))
        rows.append(row)
    return Table(caption="Verdicts by run", headers=headers, rows=rows)


def identity_table(runs: list[ComparedRun]) -> Table:
    columns = []
    for r in runs:
        if r.view is not None:
            columns.append(dict(identity.identity(r.view)))
        else:
            columns.append(
                {"run": r.run_id, "schema": f"version {r.manifest.get('schema_version')}: {r.unreadable}"}
            )
    labels = list(dict.fromkeys(label for column in columns for label in column))
    rows = [[Cell(label)] + [Cell(str(column.get(label, ""))) for column in columns] for label in labels]
    rows.insert(0, [Cell("directory")] + [Cell(str(r.path)) for r in runs])
    rows.append(
        [Cell("verdicts")] + [Cell(summary(r.view.counts()) if r.view else "unreadable") for r in runs]
    )
    return Table(caption="Runs", headers=[Cell("")] + [Cell(r.label) for r in runs], rows=rows)


def stage_comparison(stage: str, runs: list[ComparedRun]) -> StageComparison:
    out = StageComparison(anchor=anchor(stage), heading=stage)
    base = runs[0]
    others, excluded = [], []
    for run in runs[1:]:
        why = comparable(base, run, stage)
        (
            excluded.append(f"{run.label} not comparable with {base.label}: {why}")
            if why
            else others.append(run)
        )
    out.notes.extend(excluded)
    if base.view is None or not others:
        return out
    table, out.marked = metric_table(stage, [base, *others], others)
    if table is not None:
        out.tables.append(table)
    out.figures, notes = overlaid_figures(stage, [base, *others])
    out.notes.extend(notes)
    return out


def overlaid_figures(stage: str, runs: list[ComparedRun]) -> tuple[list[figure_modules.Image], list[str]]:
    made = [
        figure_modules.stage_figures(
            stage, r.view.stage_rows(stage), r.view.stage_expectations(stage), r.view.facts
        )
        for r in runs
    ]
    notes = [f"{r.label}: {note}" for r, m in zip(runs, made) for note in m.notes]
    images: list[figure_modules.Image] = []
    for index, base_fig in enumerate(made[0].figures):
        partners = [m.figures[index] if index < len(m.figures) else None for m in made[1:]]
        merged = overlay.overlay(base_fig, partners, [r.label for r in runs])
        for fig, how in merged:
            image, note = figure_modules.render(fig, f"{stage} figure {index + 1}")
            if image:
                images.append(figure_modules.Image(src=image.src, alt=f"{image.alt} — {how}"))
            if note:
                notes.append(note)
    for m in made[1:]:
        for fig in m.figures:
            figure_modules.close(fig)
    return images, notes


@dataclass
class Comparison:
    runs: list[ComparedRun]
    stages: list[StageComparison]

    def summary_lines(self) -> list[str]:
        lines = []
        for r in self.runs:
            lines.append(f"{r.label}: {r.path} — " + (summary(r.view.counts()) if r.view else r.unreadable))
        for s in self.stages:
            parts = [n for n in s.notes if "not comparable" in n]
            if s.marked:
                parts.append(f"{s.marked} metric(s) differ beyond run-to-run noise")
            if parts:
                lines.append(f"{s.heading}: " + "; ".join(parts))
        return lines


def compare(paths: list[Path]) -> Comparison:
    labels = list(string.ascii_lowercase)
    runs = [open_run(labels[i % 26] + ("" if i < 26 else str(i // 26)), p) for i, p in enumerate(paths)]
    seen = [s for r in runs if r.view for s in r.view.stages()]
    stages = [s for s in ORDER if s in seen] + sorted({s for s in seen if s not in ORDER})
    return Comparison(runs=runs, stages=[stage_comparison(s, runs) for s in stages])


def context(comparison: Comparison) -> dict[str, Any]:
    runs = comparison.runs
    names = [s.heading for s in comparison.stages]
    banners = []
    if any(r.view is not None and r.view.is_rehearsal for r in runs):
        rehearsals = ", ".join(r.label for r in runs if r.view is not None and r.view.is_rehearsal)
        banners.append(
            f"Run(s) {rehearsals} are CPU rehearsals: their performance figures mean nothing about GPUs; "
            "a ratio against a GPU run compares plumbing, not hardware."
        )
    banners += [
        f"{r.label} ({r.path}) cannot be read by this cardtime: {r.unreadable}; it is compared with nothing"
        for r in runs
        if r.unreadable
    ]
    banners += [
        f"{r.label} ({r.path}) is incomplete — {problem}"
        for r in runs
        if r.view
        for problem in r.view.problems
    ]
    return {
        "title": "cardtime comparison — " + " vs ".join(r.run_id for r in runs),
        "runs_line": " vs ".join(f"{r.label}: {r.run_id}" for r in runs),
        "banners": banners,
        "identity": identity_table(runs),
        "verdicts": verdict_matrix(runs, names),
        "toc": [Link(href="#" + s.anchor, text=s.heading) for s in comparison.stages],
        "sections": comparison.stages,
    }


def render_compare(paths: list[Path], out_path: Path) -> tuple[Path, Comparison]:
    from suite.results import atomic_write_text

    comparison = compare([Path(p) for p in paths])
    out_path = Path(out_path)
    atomic_write_text(out_path, render_template("compare.html", context(comparison)))
    out_path.chmod(0o644)
    return out_path, comparison
