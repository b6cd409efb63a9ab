"""A run directory as the report reads it: manifest, rows and expectations as DataFrames, verdicts, stage texts.

    view = load_run(Path("runs/20261129T1630Z-box-gloo-cpu"))
    view.stage_rows("bandwidth")       # that stage's rows, columns suite.results.ROW_COLUMNS

Reads only; refuses a run directory of another schema version (suite.results.SchemaError names the fix).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from suite import stages as suite_stages
from suite.results import (
    EXPECTATION_COLUMNS,
    RunDir,
    Verdict,
    records_to_frame,
    status_counts,
)


@dataclass(frozen=True)
class StageText:
    """What a stage says about itself (its module's MEASURES, WRONG, REHEARSAL), or why it cannot."""

    measures: str
    wrong: str
    rehearsal: str
    missing: str = ""
    """Empty when the stage module loaded; else why its texts are unknown in this checkout."""


@dataclass
class RunView:
    path: Path
    manifest: dict[str, Any]
    rows: pd.DataFrame
    expectations: pd.DataFrame
    verdicts: list[Verdict]
    texts: dict[str, StageText] = field(default_factory=dict)

    @property
    def run_id(self) -> str:
        return str(self.manifest.get("run_id") or self.path.name)

    @property
    def profile(self) -> dict[str, Any]:
        return self.manifest.get("profile") or {}

    @property
    def is_rehearsal(self) -> bool:
        """A CPU run: its performance numbers say nothing about GPUs."""
        profile = self.profile
        return profile.get("device") == "cpu" or not profile.get("judge_performance", False)

    @property
    def facts(self) -> dict[str, Any]:
        """What the stages published, plus the profile (as stages' judge() and figures see them)."""
        return {**(self.manifest.get("facts") or {}), "profile": self.profile}

    def counts(self) -> dict[str, int]:
        return status_counts(self.verdicts)

    def stages(self) -> list[str]:
        """Every stage the run selected or recorded anything for, in the checklist's order (unknown ones last)."""
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
        if stage not in self.texts:
            self.texts[stage] = stage_text(stage)
        return self.texts[stage]


def load_run(path: Path) -> RunView:
    """Read a run directory (raises FileNotFoundError or suite.results.SchemaError with what to do)."""
    run = RunDir.load(Path(path))
    return RunView(
        path=run.path,
        manifest=run.manifest,
        rows=run.rows_frame(),
        expectations=expectations_frame(run),
        verdicts=run.verdicts(),
    )


def expectations_frame(run: RunDir) -> pd.DataFrame:
    """expectations.csv with the same column types as the rows (integers as Int64, value as float)."""
    return records_to_frame(run.expectations(), EXPECTATION_COLUMNS)


def stage_text(stage: str) -> StageText:
    """The stage module's own sentences; a stage this checkout lacks still gets a section, saying so."""
    try:
        module = suite_stages.load(stage)
    except Exception as e:  # noqa: BLE001 - an unloadable stage module must not stop the report
        return StageText("", "", "", missing=f"stage module suite/stages/{stage}.py could not be loaded "
                                              f"({type(e).__name__}: {e}); its description is unavailable")
    return StageText(str(module.MEASURES), str(module.WRONG), str(module.REHEARSAL))


def is_missing(value: Any) -> bool:
    """pandas NA, None, NaN or an empty string."""
    if value is None or value is pd.NA:
        return True
    if isinstance(value, float) and math.isnan(value):
        return True
    return isinstance(value, str) and value == ""
