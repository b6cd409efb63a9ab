"""A run killed with SIGKILL resumes without losing or redoing a stage; a crashing or hanging stage fails
alone."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pandas as pd

from suite.launch import procs
from suite.results import RunDir

from ..conftest import PYTHON, REPO, run_suite
from ..proc_files import holds_open


def wait_for(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def stage_status(run_dir: Path, stage: str) -> str | None:
    try:
        return json.loads((run_dir / "manifest.json").read_text())["stages"][stage]["status"]
    except (OSError, ValueError, KeyError):
        return None


def test_sigkill_midway_then_resume(tmp_path):
    last = tmp_path / "LAST"
    proc = subprocess.Popen(
        [
            PYTHON,
            "-m",
            "suite",
            "run",
            "--stages",
            "topology,crossover,baseline",
            "--out",
            str(tmp_path),
            "--record-last",
            str(last),
        ],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        run_dir = Path(wait_for(lambda: last.exists() and last.read_text().strip(), 60, "the run to start"))
        # crossover: 4 ranks launched (its ring and tree over isend/irecv); baseline after it, not yet started
        wait_for(lambda: stage_status(run_dir, "crossover") == "running", 120, "crossover to start")
        # Let crossover's workers come up, then kill the runner as hard as a user's ^\ or an OOM killer would.
        wait_for(lambda: list((run_dir / "raw" / "crossover").glob("*rank*.log")), 60, "crossover's workers")
        before_kill = pd.read_parquet(run_dir / "results.parquet")
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    # The stage child, torchrun and the workers die with the runner (PR_SET_PDEATHSIG).
    deadline = time.monotonic() + 60
    while (left := leftovers(run_dir)) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not left, f"processes of the killed run survived it: {left}"
    topo_rows = before_kill[before_kill["stage"] == "topology"].reset_index(drop=True)
    assert len(topo_rows) > 0
    assert stage_status(run_dir, "topology") == "complete"
    assert stage_status(run_dir, "crossover") == "running"

    result = run_suite("run", "--resume", str(run_dir))
    assert result.returncode == 0, result.stderr[-3000:]
    assert "already complete: kept" in result.stderr
    run = RunDir.load(run_dir)
    assert {s: v["status"] for s, v in run.manifest["stages"].items()} == {
        "topology": "complete",
        "crossover": "complete",
        "baseline": "complete",
    }
    assert run.manifest["stages"]["topology"]["attempt"] == 1
    assert run.manifest["stages"]["crossover"]["attempt"] == 2
    assert run.manifest["stages"]["baseline"]["attempt"] == 1
    after = pd.read_parquet(run_dir / "results.parquet")
    pd.testing.assert_frame_equal(after[after["stage"] == "topology"].reset_index(drop=True), topo_rows)
    key = ["stage", "case", "metric", "size_bytes", "placement", "source", "algo", "rank", "repeat", "world"]
    assert not after.duplicated(subset=key).any(), "resume duplicated rows"
    ids = [v.id for v in run.verdicts()]
    assert len(ids) == len(set(ids))


def leftovers(run_dir: Path) -> list[str]:
    """Live processes working for the run: their command line or environment names its directory, or they hold
    it open — the ranks and stage children forked from the runner, whose command line is the runner's (`--out`
    names the parent folder) and who share its lock on the directory (suite/run_lock.py) until the last of
    them ends."""
    out = []
    for pid in procs.process_table():
        if procs.alive(pid) and (_cmdline_mentions(pid, str(run_dir)) or holds_open(pid, run_dir)):
            out.append(
                f"{pid}: "
                + Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").replace("\0", " ")[:200]
            )
    return out


def _cmdline_mentions(pid: int, text: str) -> bool:
    try:
        return text in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").replace(
            "\0", " "
        ) or text in " ".join(Path(f"/proc/{pid}/environ").read_bytes().decode(errors="replace").split("\0"))
    except OSError:
        return False


def test_crashing_and_hanging_stages_fail_alone(tmp_path):
    result = run_suite(
        "run",
        "--stages",
        "topology,bandwidth,crossover,baseline",
        "--out",
        str(tmp_path),
        # 2 s: the injected hang starts at once in the stage's child (suite/runner.py inject)
        "--record-last",
        str(tmp_path / "LAST"),
        "--stage-timeout",
        "crossover=2",
        env={"CARDTIME_INJECT": "bandwidth=crash,crossover=hang"},
    )
    assert result.returncode == 1, result.stderr[-3000:]
    run = RunDir.load(Path((tmp_path / "LAST").read_text().strip()))
    verdicts = {v.id: v for v in run.verdicts()}
    assert verdicts["bandwidth.run"].status == "fail"
    assert "injected crash in stage bandwidth" in verdicts["bandwidth.run"].reason
    assert verdicts["crossover.run"].status == "fail"
    assert verdicts["crossover.run"].observed == "timed out after 2 s"
    later = [v for v in verdicts.values() if v.stage == "baseline"]
    assert later and all(v.status != "fail" for v in later), later
    assert run.manifest["stages"]["baseline"]["status"] == "complete"
    assert run.manifest["stages"]["bandwidth"]["status"] == "error"
    summary = [line for line in result.stderr.splitlines() if line.startswith("summary:")]
    assert len(summary) == 1 and "2 failed" in summary[0], result.stderr  # both injected stages, nothing else
