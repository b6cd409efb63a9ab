"""Figures drawn while the run goes on (reports/predraw.py) are the report's: each figure module reads only
the facts it declares (its FACTS, the cache key's part), and a stage drawn by the drawer process is read back
by the report without drawing it again."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from reports import figures as figure_modules
from reports.figures import facts_read, module_name
from reports.runview import load_run

REHEARSAL = Path(__file__).resolve().parents[1] / "data" / "report" / "rehearsal-20261201"


class ReadFacts(dict):
    """The facts, noting every key a figure module looks up."""

    def __init__(self, *args):
        super().__init__(*args)
        self.looked_up: set[str] = set()

    def get(self, key, default=None):
        self.looked_up.add(key)
        return super().get(key, default)

    def __getitem__(self, key):
        self.looked_up.add(key)
        return super().__getitem__(key)

    def __contains__(self, key):
        self.looked_up.add(key)
        return super().__contains__(key)


@pytest.fixture(scope="module")
def view():
    return load_run(REHEARSAL)


def test_every_figure_module_reads_only_the_facts_it_declares(view):
    import importlib

    stages = [s for s in view.stages() if figure_modules.has_module(s)]
    assert len(stages) >= 15, stages
    drew = 0
    for stage in stages:
        module = importlib.import_module(module_name(stage))
        assert isinstance(getattr(module, "FACTS", None), tuple), (
            f"reports/figures/{stage}.py declares no FACTS"
        )
        facts = ReadFacts(view.facts)
        made = module.figures(view.stage_rows(stage).copy(), view.stage_expectations(stage).copy(), facts)
        drew += len(made)
        undeclared = facts.looked_up - set(module.FACTS)
        assert not undeclared, (
            f"reports/figures/{stage}.py reads facts {sorted(undeclared)} it does not declare in FACTS"
        )
    assert drew >= 20  # the rehearsal's figures were made, so their lookups were seen


def test_facts_read_keeps_the_declared_ones_only():
    class Declares:
        FACTS = ("profile", "fault_drill")

    facts = {"profile": {"nproc": 4}, "fault_drill": {"ranks": 2}, "alpha_beta": {"beta": 1.0}}
    assert facts_read(Declares, facts) == {"profile": {"nproc": 4}, "fault_drill": {"ranks": 2}}
    assert facts_read(object(), facts) == facts  # a module declaring nothing is keyed on every fact


def test_a_stage_drawn_by_the_drawer_is_not_drawn_again_by_the_report(tmp_path, monkeypatch):
    run = tmp_path / "run"
    shutil.copytree(REHEARSAL, run)
    cache = tmp_path / "cache"
    monkeypatch.setenv("CARDTIME_FIGURE_CACHE", str(cache))
    stages = ["memory", "fault"]  # one keyed on no facts, one on a fact its own stage published
    drawer = subprocess.run(
        [sys.executable, "-m", "reports.predraw", str(run)],
        input="\n".join(stages) + "\n",
        text=True,
        capture_output=True,
        timeout=120,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert drawer.returncode == 0, drawer.stderr
    assert sorted(p.name.split("-")[0] for p in cache.glob("*.json")) == sorted(stages)

    # a later stage publishes after they were drawn
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["facts"]["a_later_stage"] = {"published": "after memory and fault ended"}
    (run / "manifest.json").write_text(json.dumps(manifest))

    later = load_run(run)
    drawn: list[str] = []
    real = figure_modules.stage_figures

    def counting(stage, *args):
        drawn.append(stage)
        return real(stage, *args)

    monkeypatch.setattr(figure_modules, "stage_figures", counting)
    images = {
        stage: figure_modules.stage_images(
            stage, later.stage_rows(stage), later.stage_expectations(stage), later.facts
        )[0]
        for stage in (*stages, "crossover")
    }
    # the report's call for the drawer's stages found them drawn; the other drew
    assert drawn == ["crossover"]
    assert all(images[stage] for stage in images)  # and each came with its figures


def test_the_drawer_says_how_it_is_used_and_survives_an_unknown_stage(tmp_path):
    usage = subprocess.run(
        [sys.executable, "-m", "reports.predraw"], capture_output=True, text=True, timeout=60
    )
    assert usage.returncode == 2 and "RUN_DIR" in usage.stderr
    done = subprocess.run(
        [sys.executable, "-m", "reports.predraw", str(tmp_path / "missing")],
        input="memory\n",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0 and "predraw: memory:" in done.stderr


def test_the_runs_drawer_draws_each_stage_it_is_told_of_and_none_when_off(tmp_path, monkeypatch):
    from suite.figure_drawer import FigureDrawer

    run = tmp_path / "run"
    shutil.copytree(REHEARSAL, run)
    cache = tmp_path / "cache"
    monkeypatch.setenv("CARDTIME_FIGURE_CACHE", str(cache))
    monkeypatch.setenv("CARDTIME_PREDRAW", "off")
    assert FigureDrawer.start(run).process is None
    monkeypatch.setenv("CARDTIME_PREDRAW", "on")
    drawer = FigureDrawer.start(run)
    assert drawer.process is not None
    drawer.stage_done("memory")
    deadline = time.monotonic() + 60
    while not list(cache.glob("memory-*.json")) and time.monotonic() < deadline:
        time.sleep(0.1)
    drawer.stop()
    assert drawer.process is None
    assert [p.name.split("-")[0] for p in cache.glob("*.json")] == ["memory"]
    assert (run / "predraw.log").read_text() == ""  # nothing went wrong
