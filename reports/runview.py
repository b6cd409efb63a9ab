"""A run directory as the report reads it: manifest, rows and expectations as DataFrames, verdicts, stage
texts.

    view = load_run(Path("runs/20261129T1630Z-box-gloo-cpu"))
    view.stage_rows("bandwidth")       # that stage's rows, columns suite.results.ROW_COLUMNS

Reads only; refuses a run directory of another schema version (suite.results.SchemaError names the fix).
A damaged one (a truncated manifest, an unreadable results.parquet, a verdict of an unknown status, a
stage that never finished) is read as far as it goes: `problems` says what is missing, and the report
shows it. Only when nothing at all can be read does load_run raise (suite.results.RunDirError).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from suite import stages as suite_stages
from suite.results import (
    EXPECTATION_COLUMNS,
    ROW_COLUMNS,
    RunDir,
    RunDirError,
    SchemaError,
    Verdict,
    records_to_frame,
    status_counts,
)
from suite.run_consistency import consistency_problems


@dataclass(frozen=True)
class StageText:
    """What a stage says about itself (TITLE, MEASURES, WRONG, REHEARSAL), or why it cannot."""

    measures: str
    wrong: str
    rehearsal: str
    missing: str = ""
    """Empty when the texts were found; else why they are unknown."""
    title: str = ""
    recorded: bool = False
    """True when read from the run's manifest (`stage_texts`, what the run's own code said); False: today's
    code."""


@dataclass
class RunView:
    path: Path
    manifest: dict[str, Any]
    rows: pd.DataFrame
    expectations: pd.DataFrame
    verdicts: list[Verdict]
    texts: dict[str, StageText] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    """What could not be read, one line each (file: what is wrong); empty for an intact run directory."""
    manifest_read: bool = True
    """False when manifest.json is damaged: the profile, host and stage states are then unknown, not empty."""

    @property
    def run_id(self) -> str:
        return str(self.manifest.get("run_id") or self.path.name)

    @property
    def profile(self) -> dict[str, Any]:
        return self.manifest.get("profile") or {}

    @property
    def is_rehearsal(self) -> bool:
        """A CPU run: its performance numbers say nothing about GPUs (unknown, so not claimed, without a
        manifest)."""
        if not self.manifest_read:
            return False
        profile = self.profile
        return profile.get("device") == "cpu" or not profile.get("judge_performance", False)

    @property
    def facts(self) -> dict[str, Any]:
        """What the stages published, plus the profile (as stages' judge() and figures see them)."""
        return {**(self.manifest.get("facts") or {}), "profile": self.profile}

    def counts(self) -> dict[str, int]:
        return status_counts(self.verdicts)

    def stages(self) -> list[str]:
        """Every stage the run selected or recorded anything for, in the checklist's order (unknown ones
        last)."""
        seen: list[str] = list(self.manifest.get("stages_selected") or [])
        seen += list((self.manifest.get("stages") or {}).keys())
        seen += [v.stage for v in self.verdicts]
        seen += list(self.rows["stage"].dropna().unique()) if len(self.rows) else []
        unique = list(dict.fromkeys(str(s) for s in seen))
        known = [s for s in suite_stages.ORDER if s in unique]
        return known + sorted(s for s in unique if s not in suite_stages.ORDER)

    def stage_rows(self, stage: str) -> pd.DataFrame:
        return self.rows[self.rows["stage"] == stage].reset_index(drop=True)

    def stage_expectations(self, stage: str) -> pd.DataFrame:
        return self.expectations[self.expectations["stage"] == stage].reset_index(drop=True)

    def stage_verdicts(self, stage: str) -> list[Verdict]:
        return [v for v in self.verdicts if v.stage == stage]

    def stage_state(self, stage: str) -> dict[str, Any]:
        return (self.manifest.get("stages") or {}).get(stage) or {}

    def text(self, stage: str) -> StageText:
        """The texts the run recorded for the stage; for a run made before they were recorded, today's
        code's."""
        if stage not in self.texts:
            self.texts[stage] = recorded_text(self.manifest, stage) or stage_text(stage)
        return self.texts[stage]


def load_run(path: Path) -> RunView:
    """Read a run directory as far as it goes (see the module's docstring).

    Raises FileNotFoundError (not a run directory), SchemaError (another schema version) or RunDirError
    (not one of its records readable), each with what to do.
    """
    path = Path(path)
    problems: list[str] = []

    def attempt(read, empty):
        try:
            return read(), True
        except SchemaError:
            raise
        except RunDirError as e:
            problems.append(str(e.file.name) + ": " + e.problem)
            return empty, False

    run, manifest_ok = attempt(lambda: RunDir.load(path), RunDir(path=path, manifest={}))
    rows, rows_ok = attempt(run.rows_frame, records_to_frame([], ROW_COLUMNS))
    expectations, expectations_ok = attempt(
        lambda: expectations_frame(run), records_to_frame([], EXPECTATION_COLUMNS)
    )
    (verdicts, bad_verdicts), verdicts_ok = attempt(run.read_verdicts, ([], []))
    problems += [f"{RunDir.VERDICTS}: {line} — left out" for line in bad_verdicts]
    if not (manifest_ok or rows_ok or expectations_ok or verdicts_ok):
        raise RunDirError(path, "none of its records can be read (" + "; ".join(problems) + ")")
    view = RunView(
        path=run.path,
        manifest=run.manifest,
        rows=rows,
        expectations=expectations,
        verdicts=verdicts,
        problems=problems,
        manifest_read=manifest_ok,
    )
    view.problems += stages_never_finished(view)
    # each read as its type; do they agree (what `suite check` refuses)?
    if manifest_ok and rows_ok and verdicts_ok:
        view.problems += consistency_problems(run, rows, verdicts)
    return view


def stages_never_finished(view: RunView) -> list[str]:
    """One line per recorded stage that started but never finished (killed mid-stage): its records may be
    partial."""
    stages = view.manifest.get("stages")
    if not isinstance(stages, dict):
        return []
    return [
        f"stage {name} never finished (state {state.get('status')!r}): its rows and verdicts are missing or "
        f"partial; resume it with `python -m suite run --resume {view.path}`"
        for name, state in stages.items()
        if isinstance(state, dict) and state.get("status") == "running"
    ]


def expectations_frame(run: RunDir) -> pd.DataFrame:
    """expectations.csv with the same column types as the rows (integers as Int64, value as float)."""
    return records_to_frame(run.expectations(), EXPECTATION_COLUMNS)


def recorded_text(manifest: dict[str, Any], stage: str) -> StageText | None:
    """The manifest's `stage_texts` entry for the stage (runner.initial_manifest writes it), or None."""
    recorded = (
        (manifest.get("stage_texts") or {}).get(stage)
        if isinstance(manifest.get("stage_texts"), dict)
        else None
    )
    if not isinstance(recorded, dict) or not recorded.get("measures"):
        return None
    return StageText(
        str(recorded.get("measures", "")),
        str(recorded.get("wrong", "")),
        str(recorded.get("rehearsal", "")),
        title=str(recorded.get("title", "")),
        recorded=True,
    )


def stage_text(stage: str) -> StageText:
    """The stage's own sentences; a stage this checkout lacks still gets a section, saying so."""
    try:
        declared = suite_stages.declaration(stage)
    except Exception as e:  # noqa: BLE001 - an unloadable stage module must not stop the report
        return StageText(
            "",
            "",
            "",
            missing=f"stage suite/stages/{stage}/ could not be loaded "
            f"({type(e).__name__}: {e}); its description is unavailable",
        )
    return StageText(declared.measures, declared.wrong, declared.rehearsal, title=declared.title)
