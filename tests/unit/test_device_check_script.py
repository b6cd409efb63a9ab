"""tests/gpu/device_check.sh without a GPU: its syntax (bash -n, shellcheck where installed), the plan its dry
run prints (the one-card stages first, every step's limit summing under the 8-minute budget), and a run whose
Python has no torch at all — the first step fails naming what to do, and nothing after it runs. The GPU run
itself needs a lent device; `tests/gpu/device_check.sh --cpu` runs every step on gloo-cpu."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "gpu" / "device_check.sh"
STEPS = ("torch", "versions", "captures", "onecard", "parse", "links", "check", "report")
BUDGET_S = 480


def run(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=120, env=env)


def plan(tmp_path) -> tuple[list[tuple[str, int, str]], str]:
    result = run("--dry-run", str(tmp_path / "out"))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    steps = [
        (m[1], int(m[2]), lines[i + 1].strip())
        for i, line in enumerate(lines)
        if (m := re.match(r"step (\S+)\s+≤\s*(\d+)s", line))
    ]
    return steps, result.stdout


def test_the_script_is_valid_bash_and_shellcheck_clean():
    assert subprocess.run(["bash", "-n", str(SCRIPT)]).returncode == 0
    if shutil.which("shellcheck") is None:
        pytest.skip("shellcheck not installed")
    result = subprocess.run(["shellcheck", str(SCRIPT)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout


def test_the_dry_run_lists_the_steps_one_card_stages_first(tmp_path):
    steps, out = plan(tmp_path)
    assert [name for name, _, _ in steps] == list(STEPS)
    commands = dict((name, command) for name, _, command in steps)
    assert commands["onecard"].startswith("suite_run onecard nccl1gpu,pinned,precision,baseline ")
    assert commands["links"].startswith("suite_run links topology,bandwidth ")
    assert not (tmp_path / "out" / "summary.txt").read_text()  # nothing ran


def test_every_limit_sums_under_the_budget_and_each_stage_fits_its_step(tmp_path):
    steps, out = plan(tmp_path)
    text = SCRIPT.read_text()
    reserve = int(re.search(r"^RESERVE_S=(\d+)", text, re.M)[1])
    grace = int(re.search(r"^KILL_AFTER_S=(\d+)", text, re.M)[1])
    total = sum(limit + grace for _, limit, _ in steps) + reserve
    assert total <= BUDGET_S, total
    assert f"plan: ≤ {total} s" in out and f"of the {BUDGET_S}-s budget" in out
    limits = {name: limit for name, limit, _ in steps}
    for name, timeouts in (("onecard", "ONECARD_TIMEOUTS"), ("links", "LINKS_TIMEOUTS")):
        stage_s = [int(v) for v in re.findall(r"=(\d+)", re.search(rf"^{timeouts}=(\S+)", text, re.M)[1])]
        assert sum(stage_s) + 10 <= limits[name], (name, stage_s)  # + the launcher's and the run's own start


def test_the_links_run_stays_under_the_one_gib_cap():
    from suite.config import PROFILES

    assert PROFILES["nccl-1gpu"].sweep.max_bytes <= 2**30


def test_a_python_without_the_pinned_torch_fails_the_first_step_and_nothing_runs_after(tmp_path):
    env = {**os.environ, "PYTHON": "/bin/false"}  # no interpreter at all: the plainest "not the pin"
    result = run("--cpu", str(tmp_path / "out"), env=env)
    assert result.returncode == 1
    summary = (tmp_path / "out" / "summary.txt").read_text().splitlines()
    assert [line.split()[:2] for line in summary] == [["FAIL", "torch"]]
    assert "PYTHON=/bin/false has no torch ≥ 2.9" in (tmp_path / "out" / "steps" / "torch.log").read_text()
    assert summary[0] in result.stdout  # printed as it ended, not only kept
    assert "FAILED: torch" in result.stdout
    assert run("--bogus").returncode == 2


def test_the_cpu_mode_finds_the_pinned_torch_and_skips_the_gpu_steps(tmp_path):
    """This machine's venv has the pin (a CPU build): --cpu accepts it; captures skip. (versions is left out:
    its 20-s limit is the GPU box's, and importing torch twice on a loaded 2-core machine can take longer.)"""
    python = Path(__file__).resolve().parents[2] / ".venv" / "bin" / "python"
    if not python.exists():
        pytest.skip("no .venv (make .venv/.installed)")
    env = {**os.environ, "PYTHON": str(python)}
    out = tmp_path / "out"
    # Only these steps (DEVICE_CHECK_STEPS); a full --cpu run takes minutes.
    steps = subprocess.run(
        ["bash", str(SCRIPT), "--cpu", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
        env={**env, "DEVICE_CHECK_STEPS": "torch,captures"},
    )
    summary = (out / "summary.txt").read_text().splitlines()
    assert [line.split()[:2] for line in summary] == [["ok", "torch"], ["skip", "captures"]], steps.stdout
    assert (out / "python.txt").read_text().strip() == str(python)
    assert f"{python}: torch 2.13.0" in (out / "steps" / "torch.log").read_text()


def test_each_stage_limit_is_at_least_the_suites_own_estimate():
    """A limit below the stage's own estimate (nccl1gpu had 40 s against 85) fails a healthy card by the
    clock."""
    from suite.config import get_profile
    from suite.plan.hours import PlanAssumptions, estimate

    own = {
        s.stage: s.seconds
        for s in estimate(get_profile("nccl-1gpu"), PlanAssumptions(gpu_name="NVIDIA H200")).stages
    }
    text = SCRIPT.read_text()
    for timeouts in ("ONECARD_TIMEOUTS", "LINKS_TIMEOUTS"):
        for stage, limit in re.findall(r"(\w+)=(\d+)", re.search(rf"^{timeouts}=(\S+)", text, re.M)[1]):
            assert stage not in own or int(limit) >= own[stage], (stage, limit, own[stage])


def test_a_torch_other_than_the_pin_is_taken_and_an_older_one_refused(tmp_path):
    """The lent H200 brings torch 2.11.0+cu130: the first step takes it (the pin is 2.13.0) and records it; a
    torch older than MIN_TORCH is refused. Stand-in torch packages carry only the version fields the step
    reads."""
    for version, cuda, code in (("2.11.0+cu130", "13.0", 0), ("2.8.0+cu126", "12.6", 1)):
        site = tmp_path / version / "torch"
        site.mkdir(parents=True)
        (site / "__init__.py").write_text(f"__version__ = {version!r}\nclass version:\n    cuda = {cuda!r}\n")
        env = {
            **os.environ,
            "PYTHON": sys.executable,
            "PYTHONPATH": str(site.parent),
            "DEVICE_CHECK_STEPS": "torch",
        }
        result = run(str(tmp_path / version / "out"), env=env)
        assert result.returncode == code, result.stdout
        log = (tmp_path / version / "out" / "steps" / "torch.log").read_text()
        assert f"torch {version} (CUDA {cuda})" in log
