"""tests/gpu/device_check.sh without a GPU: its syntax (bash -n, shellcheck where installed), the steps
its dry run lists, and a run whose Python fails at every step — exit 1, each failed step named. The
GPU run itself needs a lent device; `tests/gpu/device_check.sh --cpu` runs every step on gloo-cpu."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "gpu" / "device_check.sh"
STEPS = ("versions", "captures", "health", "parse", "suite", "check", "report", "onecard", "pytest", "pp", "ep", "cp")


def run(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=120, env=env)


def test_the_script_is_valid_bash_and_shellcheck_clean():
    assert subprocess.run(["bash", "-n", str(SCRIPT)]).returncode == 0
    if shutil.which("shellcheck") is None:
        pytest.skip("shellcheck not installed")
    result = subprocess.run(["shellcheck", str(SCRIPT)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout


def test_the_dry_run_lists_every_step_with_its_command(tmp_path):
    result = run("--dry-run", str(tmp_path / "out"))
    assert result.returncode == 0, result.stderr
    listed = [line.split()[1] for line in result.stdout.splitlines() if line.startswith("step ")]
    assert listed == list(STEPS)
    assert "--profile nccl-gpu --nproc 1 --stages topology,bandwidth,crossover,baseline,profile" in result.stdout
    assert not (tmp_path / "out" / "summary.txt").read_text()  # nothing ran


def test_failing_steps_are_named_and_the_exit_code_is_1(tmp_path):
    import os

    env = {**os.environ, "PYTHON": "/bin/false"}  # every step that runs Python fails at once
    result = run("--cpu", str(tmp_path / "out"), env=env)
    assert result.returncode == 1
    summary = (tmp_path / "out" / "summary.txt").read_text().splitlines()
    assert [line.split()[:2] for line in summary] == [
        ["FAIL", "versions"], ["skip", "captures"], ["FAIL", "health"], ["skip", "parse"], ["FAIL", "suite"],
        ["FAIL", "check"], ["FAIL", "report"], ["FAIL", "onecard"], ["skip", "pytest"], ["skip", "pp"], ["skip", "ep"],
        ["skip", "cp"]]
    assert "needs 2 GPUs, 0 visible" in summary[-1] and "context parallel" in summary[-1]
    assert "FAILED: versions health suite check report onecard" in result.stdout
    assert run("--bogus").returncode == 2
