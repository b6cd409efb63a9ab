"""The whole rehearsal as `make rehearse` runs it, and the CLI a user types."""

from __future__ import annotations

import json

import pandas as pd

from suite import stages
from suite.results import SCHEMA_VERSION, RunDir

from ..conftest import run_suite


def test_rehearsal_leaves_a_complete_run_directory(rehearsal_run):
    run = RunDir.load(rehearsal_run)
    output = (rehearsal_run / "rehearsal-output.txt").read_text()
    assert run.manifest["schema_version"] == SCHEMA_VERSION
    assert run.manifest["stages_selected"] == stages.available() == list(stages.ORDER), output
    states = {name: s["status"] for name, s in run.manifest["stages"].items()}
    assert set(states.values()) == {"complete"}, f"{states}\n{output[-4000:]}"
    verdicts = run.verdicts()
    failed = [f"{v.id}: {v.observed} — {v.reason[:500]}" for v in verdicts if v.status == "fail"]
    assert not failed, "\n".join(failed)
    for name in stages.ORDER:
        assert any(v.stage == name for v in verdicts), f"stage {name} gave no verdict"
        assert (rehearsal_run / "raw" / name).is_dir()
    parquet = pd.read_parquet(rehearsal_run / "results.parquet")
    csv = pd.read_csv(rehearsal_run / "results.csv")
    assert len(parquet) == len(csv) > 0
    assert set(parquet["stage"]) >= {"topology", "bandwidth"}
    assert len(run.expectations()) > 0
    assert (rehearsal_run / "report.html").stat().st_size > 10_000
    assert run.manifest["finished"] is not None
    assert not (rehearsal_run / "progress.json").exists()
    assert "exit 0" in output.splitlines()[0]


def test_list_names_every_stage_in_order():
    result = run_suite("run", "--list")
    assert result.returncode == 0
    lines = [line.split()[1] for line in result.stdout.splitlines()[1:] if line[:2].strip().isdigit()]
    assert lines == list(stages.ORDER)


def test_usage_errors_exit_2_with_one_line(tmp_path):
    for args in (
        ["run", "--stages", "topology,warpdrive"],
        ["run", "--resume", str(tmp_path / "nope")],
        ["run", "--profile", "gloo-cpu", "--nproc", "0"],
        ["run", "--stage-timeout", "fault=-1"],
    ):
        result = run_suite(*args, "--out", str(tmp_path))
        assert result.returncode == 2, (args, result.stderr)
        # one error line; a wrong option's has argparse's usage above it
        lines = result.stderr.strip().splitlines()
        assert "Traceback" not in result.stderr and "error" in lines[-1], result.stderr
        assert len(lines) == 1 or lines[0].startswith("usage:"), result.stderr


def test_help_lists_the_commands():
    result = run_suite("--help")
    assert result.returncode == 0
    for command in ("run", "parse", "model", "check", "plan"):
        assert command in result.stdout


def test_model_command_json_matches_the_checklist():
    result = run_suite(
        "model", "--alpha", "5e-6", "--beta", "200e9", "--cards", "4", "--sizes", "4K", "4M", "--json"
    )
    rows = json.loads(result.stdout)
    assert [
        (r["cards"], r["bytes"], round(r["ring_us"], 1), round(r["tree_us"], 1), r["faster"]) for r in rows
    ] == [(4, 4096, 30.0, 20.1, "tree"), (4, 4194304, 61.5, 103.9, "ring")]
