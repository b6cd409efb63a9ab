"""NVLink and IB error counters read around every load stage of a GPU run, growth named per link/port and
window.

    watch = FabricWatch.for_run(run, profile, produce, load_stages)   # suite/runner.py, once per run
    watch.before(name); run_stage(...); watch.after(name)

A load stage is one that launches ranks (suite/workloads/: bandwidth, baseline, dp, burnin, …). Before it,
every NVLink error counter (`nvidia-smi nvlink -e`, kept as raw/<stage>/nvlink-e-window-before.txt) and IB
port error counter (sysfs) is read; after it, again. Growth inside the window is that stage's
(`<stage>.fabric_window`: fail naming each counter); growth between two load stages (while a non-load stage
ran, or the host idled) is named in the next load stage's verdict as "between A and B". So counters read
before the first load stage and after the last cover the whole run, and each increment says when it came. A
host where nothing is readable gets no window verdict (burnin's own `burnin.fabric` says so once); the
rehearsal and `suite ingest` read nothing.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass, field, replace
from pathlib import Path

from suite.hardware import fabric_counters as fabric
from suite.results import Row, RunDir, Verdict
from suite.verdicts import verdicts_for

CASE = "fabric_window"
BETWEEN = "fabric_between"


@dataclass
class FabricWatch:
    run: RunDir | None
    load_stages: frozenset[str] = frozenset()
    last: tuple[str, dict[str, int]] | None = None
    """(the load stage it was read after, the counters then)."""
    current: dict[str, int] = field(default_factory=dict)
    between: list[Row] = field(default_factory=list)
    """Growth since the last load stage ended, each row's text naming the counter and the window."""
    ib_root: Path = fabric.IB_ROOT

    @classmethod
    def for_run(cls, run: RunDir, profile, produce, load_stages) -> "FabricWatch":
        """Active on a GPU profile's live run only (`load_stages`: the selected stages that launch ranks)."""
        live = not profile.is_rehearsal and not produce
        return cls(run if live else None, frozenset(load_stages) if live else frozenset())

    def before(self, name: str) -> None:
        if name in self.load_stages:
            self._guarded(name, self._before)

    def after(self, name: str) -> None:
        if name in self.load_stages:
            self._guarded(name, self._after)

    def _guarded(self, name: str, step) -> None:
        """A counter read that fails costs its window's verdict, never the run: the error is kept beside the
        raw."""
        try:
            step(name)
        except Exception:  # noqa: BLE001 — the stages' own verdicts stand; this is a side reading
            (self.run.raw_dir(name) / "fabric-window-error.txt").write_text(traceback.format_exc())

    def _before(self, name: str) -> None:
        self.current = fabric.snapshot(self.run.raw_dir(name), "window-before", self.ib_root)
        self.between = []
        if self.last is not None:
            rows = fabric.growth_rows(self.last[1], self.current, stage=name, case=BETWEEN)
            self.between = [replace(r, text=f"{r.text} between {self.last[0]} and {name}") for r in rows]

    def _after(self, name: str) -> None:
        after = fabric.snapshot(self.run.raw_dir(name), "window-after", self.ib_root)
        rows = fabric.growth_rows(self.current, after, stage=name, case=CASE) + self.between
        self.last = (name, after)
        if not rows:
            return
        self.run.replace_stage_rows(name, [r for r in self.run.rows() if r.stage == name] + rows)
        self.run.replace_stage_verdicts(
            name, [v for v in self.run.verdicts() if v.stage == name] + [window_verdict(rows, name)]
        )


def window_verdict(rows: list[Row], stage: str) -> Verdict:
    """`<stage>.fabric_window`: the counters that grew during the stage, and those that grew since the last
    load stage ended (their text names the window: "… between dp and burnin")."""
    inside = fabric.fabric_verdict(rows, stage=stage, case=CASE, window=f"the {stage} stage")
    gap = [f"{r.text} +{r.value:g}" for r in rows if r.case == BETWEEN and r.value > 0]
    if not gap:
        return inside
    grew = [] if inside.status == "pass" else [inside.observed]
    return verdicts_for(stage).fail(
        CASE,
        expected=f"{inside.expected}, nor since the last load stage ended",
        observed="; ".join(grew + gap),
        reason="errors accrued on these links while the box ran the load stages: a marginal cable, "
        "transceiver or "
        "port; reseat or replace it (ask the provider), then rerun `--recheck`",
    )
