"""One run directory → report.html: the first screen answers (identity line, verdict count, what needs
attention, one line per stage with its headline figure), then one section per stage, figure first.

    python -m reports runs/20261129T1630Z-box-gloo-cpu        # writes runs/…/report.html

Everything the template shows is prepared here as strings and lists; the template only loops
(and autoescapes, so a hostname or GPU name holding markup renders as text).
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import statistics
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reports import evidence, fmt, headline, identity, tables
from reports import figures as figure_modules
from reports.render import render_template
from reports.runview import RunView, load_run
from suite import next_steps
from suite.box_verdict import INCONCLUSIVE, REHEARSAL, BoxVerdict, Open, box_verdict, judges_performance
from suite.hardware import public_references
from suite.results import Verdict, atomic_write_text
from suite.stages import CHECKLIST_ROW, ORDER
from suite.verdicts import SEVERITY, SEVERITY_RANK, failed_stages, summary_line

MAX_RAW_LINKS = 200
PARALLEL = 4
RUN_FILES = ("manifest.json", "verdicts.json", "results.csv", "results.parquet", "expectations.csv")


@dataclass(frozen=True)
class BoardRow:
    stage: str
    anchor: str
    status: str
    id: str
    expected: str
    observed: str
    reason: str


@dataclass(frozen=True)
class Link:
    href: str
    text: str


@dataclass
class Section:
    anchor: str
    name: str
    heading: str
    line: headline.StageLine
    measures: list[str]
    wrong: list[str]
    about: list[str]
    """Further lines: the CPU face, a missing stage module, the stage's state."""
    figures: list[figure_modules.Image] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    tables: list[tables.Table] = field(default_factory=list)
    raw_links: list[Link] = field(default_factory=list)


def anchor(stage: str) -> str:
    return f"stage-{stage}"


summary = summary_line  # the name reports/__main__.py and compare.py import


def board(verdicts: list[Verdict]) -> list[BoardRow]:
    """Failures first (suite.verdicts.SEVERITY); within a status, stages in run order."""
    position = {name: i for i, name in enumerate(ORDER)}

    def key(v: Verdict) -> tuple:
        return SEVERITY_RANK[v.status], position.get(v.stage, len(ORDER)), v.stage, v.id

    return [
        BoardRow(
            stage=v.stage,
            anchor=anchor(v.stage),
            status=v.status,
            id=v.id,
            expected=v.expected,
            observed=v.observed,
            reason=fmt.first_line(v.reason),
        )
        for v in sorted(verdicts, key=key)
    ]


def verdict_table(verdicts: list[Verdict], caption: str = "Verdicts", folded: bool = False) -> tables.Table:
    rows = [
        [
            tables.Cell(v.id, "id"),
            tables.Cell(v.status, f"badge {v.status}"),
            tables.Cell(v.expected),
            tables.Cell(v.observed),
            tables.Cell(v.reason, "reason"),
        ]
        for v in sorted(verdicts, key=lambda v: (SEVERITY_RANK[v.status], v.id))
    ]
    headers = [tables.Cell(h) for h in ("verdict", "status", "expected", "observed", "reason")]
    return tables.Table(caption=caption, headers=headers, rows=rows, folded=folded)


def verdict_tables(verdicts: list[Verdict]) -> list[tables.Table]:
    """Expected vs observed for the checks that were judged; the skipped ones folded behind one line."""
    judged = [v for v in verdicts if v.status != "skip"]
    skipped = [v for v in verdicts if v.status == "skip"]
    out = [verdict_table(judged, "Expected and observed, per check")] if judged else []
    if skipped:
        out.append(verdict_table(skipped, "Skipped checks", folded=True))
    return out


def state_line(view: RunView, stage: str) -> str:
    state = view.stage_state(stage)
    if not state:
        return "not recorded in the manifest"
    status = state.get("status", "pending")
    parts = [status]
    if state.get("attempt"):
        parts.append(f"attempt {state['attempt']}")
    if state.get("start"):
        parts.append(fmt.span(state.get("start"), state.get("end")))
    if state.get("rows") is not None:
        parts.append(f"{state['rows']} rows")
    if status == "pending":
        parts.append("did not run")
    return "state: " + " · ".join(parts)


def relative_href(target: Path, out_dir: Path) -> str:
    """A link that works wherever the run directory and its report travel together (relative, URL-quoted)."""
    return urllib.parse.quote(Path(os.path.relpath(target, out_dir)).as_posix())


def raw_links(view: RunView, stage: str, out_dir: Path) -> tuple[list[Link], list[str]]:
    folder = view.path / "raw" / stage
    if not folder.is_dir():
        return [], []
    files = sorted(
        p
        for p in folder.rglob("*")
        if p.is_file() and not any(part.startswith(".") for part in p.relative_to(folder).parts)
    )
    links = []
    for p in files[:MAX_RAW_LINKS]:
        links.append(
            Link(
                href=relative_href(p, out_dir),
                text=f"{p.relative_to(view.path).as_posix()} ({fmt.file_size(p.stat().st_size)})",
            )
        )
    notes = [f"first {MAX_RAW_LINKS} of {len(files)} raw files linked"] if len(files) > MAX_RAW_LINKS else []
    return links, notes


def section(view: RunView, stage: str, out_dir: Path) -> Section:
    text = view.text(stage)
    about = []
    if text.missing:
        about.append(text.missing)
    elif view.is_rehearsal:
        about.append(
            f"On CPU: {text.rehearsal}"
            if text.rehearsal
            else "No CPU face: this stage needs GPUs and is skipped in a rehearsal."
        )
    about.append(state_line(view, stage))
    number = CHECKLIST_ROW.get(stage)
    rows, expectations = view.stage_rows(stage), view.stage_expectations(stage)
    verdicts = view.stage_verdicts(stage)
    title = f" — {text.title}" if text.title else ""
    out = Section(
        anchor=anchor(stage),
        name=stage,
        heading=(f"{stage} (checklist #{number})" if number else stage) + title,
        line=headline.stage_line(
            stage,
            anchor(stage),
            rows,
            expectations,
            verdicts,
            state_line(view, stage),
            judges_box=view.manifest_read and judges_performance(view.manifest),
            rehearsal=view.is_rehearsal,
        ),
        measures=[f"Measures: {text.measures}"] if text.measures else [],
        wrong=[f"Wrong looks like: {text.wrong}"] if text.wrong else [],
        about=about,
    )
    out.figures, notes = figure_modules.stage_images(stage, rows, expectations, view.facts)
    out.notes.extend(notes)
    out.tables.extend(verdict_tables(verdicts))
    if len(expectations):
        out.tables.append(tables.expectation_table(expectations, rows))
    if len(rows):
        out.tables.append(tables.rows_table(rows))
    out.raw_links, link_notes = raw_links(view, stage, out_dir)
    out.notes.extend(link_notes)
    return out


_FORKED: tuple[RunView, Path] | None = None
"""The view a forked section worker reads (inherited from the parent, never pickled)."""


def _forked_section(stage: str) -> Section:
    view, out_dir = _FORKED
    return section(view, stage, out_dir)


def all_sections(view: RunView, out_dir: Path) -> list[Section]:
    """Every stage's section; drawing the figures is most of a report's time, so stages are drawn in forked
    workers, one per CPU (at most PARALLEL), when there are several. Serially where fork is unavailable."""
    global _FORKED
    stages = view.stages()
    workers = min(PARALLEL, os.cpu_count() or 1, len(stages))
    # a daemonic process may not start workers
    if (
        workers < 2
        or "fork" not in multiprocessing.get_all_start_methods()
        or multiprocessing.current_process().daemon
    ):
        return [section(view, s, out_dir) for s in stages]
    figure_modules.warm_up(stages)  # imports and fonts loaded once, shared by the workers, not once in each
    _FORKED = (view, out_dir)
    try:
        # the biggest stages first (by rows: the figures' work grows with them), so no worker is left with a
        # big one at the end while the others idle; the sections come back in run order all the same
        biggest_first = sorted(stages, key=lambda s: -len(view.stage_rows(s)))
        with multiprocessing.get_context("fork").Pool(
            workers, initializer=_leave_ctrl_c_to_the_parent
        ) as pool:
            drawn = dict(zip(biggest_first, pool.map(_forked_section, biggest_first, chunksize=1)))
        return [drawn[s] for s in stages]
    except OSError:  # no processes to be had (a limit on them): the same sections, one after another
        return [section(view, s, out_dir) for s in stages]
    finally:
        _FORKED = None


def _leave_ctrl_c_to_the_parent() -> None:
    """A drawing worker ignores SIGINT: Ctrl-C reaches the whole process group, and the parent alone answers
    it (one `interrupted:` line; the pool's exit ends the workers) instead of each worker printing a
    traceback."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def context(view: RunView, out_path: Path) -> dict[str, Any]:
    counts = view.counts()
    sections = all_sections(view, out_path.parent)
    box = box_of(view)
    return {
        "title": f"cardtime report — {view.run_id}",
        "run_id": view.run_id,
        "box": box,
        "next_steps": next_steps_of(box, view),
        "hangs": evidence.hangs(
            view.path,
            lambda p: relative_href(p, out_path.parent),
            failed_stages(view.manifest if view.manifest_read else {}, view.verdicts),
        ),
        "bundle": evidence.bundle(view.path, lambda p: relative_href(p, out_path.parent)),
        "standing": standing_lines(view),
        "banners": identity.banners(view),
        "identity_line": identity.one_line(view),
        "identity": identity.identity(view),
        "summary": summary(counts),
        "counts": [(status, counts[status]) for status in SEVERITY],
        "worst": count_colour(headline.worst_status(view.verdicts), box),
        "attention": headline.attention(view.verdicts, anchor, list(ORDER)),
        "stage_lines": [s.line for s in sections],
        "toc": [Link(href="#" + anchor(s), text=s) for s in view.stages()],
        "sections": sections,
        "files": [
            Link(href=relative_href(view.path / name, out_path.parent), text=name)
            for name in RUN_FILES
            if (view.path / name).exists()
        ],
    }


def standing_lines(view: RunView) -> list[str]:
    """Where this box stands, one line per headline figure it measured: against the best public figure for
    its model (suite/hardware/public_references.py) or saying there is none, and beside the median of the
    user's other boxes of the model where the library has them."""
    facts = view.facts if view.manifest_read else {}
    found = public_references.standing(facts, view.rows)
    bare = public_references.unreferenced(facts, view.rows)
    model, _ = public_references.box_of(facts)
    earlier = library_medians(view, model, [s.reference.metric for s in found] + [m for m, _ in bare])
    lines = [s.line + earlier.get(s.reference.metric, "") for s in found]
    lines += [line + earlier.get(metric, "") for metric, line in bare]
    none = public_references.no_reference_line(facts)
    return lines or ([none] if none else [])


def library_medians(view: RunView, model: str | None, metrics: list[str]) -> dict[str, str]:
    """metric → '; your 19 other H100 SXM boxes in the library: median 452.0 GB/s', from the library
    (suite/library/index.py) when it holds other runs of the model; none is made where there is none."""
    from suite.library import index
    from suite.library.summary import run_key

    library = index.default_path(view.path.parent)
    if not model or not metrics or not library.is_file() or not view.manifest_read:
        return {}
    out, mine = {}, run_key(view.manifest)
    with index.opened(library) as db:
        for metric in metrics:
            others = index.values(db, model, metric, excluding=mine)
            if others:
                n = len(others)
                out[metric] = (
                    f"; your {n} other {model} box{'es' if n != 1 else ''} in the library: "
                    f"median {statistics.median(others):,.1f} {public_references.UNITS[metric]}"
                )
    return out


def count_colour(worst: str, box: BoxVerdict) -> str:
    """The verdict count's colour: its worst status, but never green on a box left INCONCLUSIVE."""
    return "open" if box.word == INCONCLUSIVE and worst in ("pass", "skip") else worst


def next_steps_of(box: BoxVerdict, view: RunView) -> list[tuple[str, list[str]]]:
    """What would decide the open checks (suite/next_steps.py), for the first screen; none for a rehearsal."""
    if box.word == REHEARSAL:
        return [] if box.rejected or box.open else [(next_steps.AFTER_REHEARSAL, [])]
    if not box.open:
        return []
    return next_steps.grouped(box.open, view.manifest if view.manifest_read else {})


def box_of(view: RunView) -> BoxVerdict:
    """The box verdict the first line shows; a run whose manifest cannot be read decides nothing."""
    if not view.manifest_read:
        return BoxVerdict(
            INCONCLUSIVE, open=[Open("manifest.json", "cannot be read: the profile and the plan are unknown")]
        )
    return box_verdict(view.manifest, view.verdicts)


def render_run(view: RunView, out_path: Path | None = None) -> Path:
    """Write the report (default RUN_DIR/report.html) and return its path."""
    out_path = Path(out_path) if out_path else view.path / "report.html"
    html = render_template("report.html", context(view, out_path))
    atomic_write_text(out_path, html)
    out_path.chmod(0o644)  # meant to be opened and shared, unlike the run's private temporaries
    return out_path


def render_path(run_dir: Path, out_path: Path | None = None) -> tuple[Path, RunView]:
    view = load_run(run_dir)
    return render_run(view, out_path), view
