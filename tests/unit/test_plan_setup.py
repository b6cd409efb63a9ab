"""Issue 12 item 14: `make plan` counts the set-up minutes the renter pays for (arithmetic checked by
hand)."""

from __future__ import annotations

import pytest

from suite.config import get_profile
from suite.plan.hours import estimate, render
from suite.plan.setup import SetupAssumptions, after, before, check

MB, GB = 1e6, 1e9


def lines(items):
    return {line.step: line for line in items}


def test_pull_is_its_size_over_the_download_rate_plus_unpacking():
    got = lines(
        before(SetupAssumptions(image="pull", download_Bps=100 * MB, download_basis="measured by preflight"))
    )
    # (0.05 base + 0.144 debs + 0.31 CUDA wheels + 2.8 torch + 0.5 nsys) GB = 3.804 GB / 100 MB/s = 38.04 s;
    # 9 GB / 200 MB/s = 45 s
    assert got["image pull"].seconds == pytest.approx(83.04)
    assert "measured by preflight" in got["image pull"].basis
    assert got["code sync"].seconds == pytest.approx(10 + 20 / 5)  # 20 MB at 5 MB/s + SSH
    assert got["venv"].seconds == 0.0 and got["venv"].basis == "inside the image"


def test_build_is_its_steps():
    got = lines(before(SetupAssumptions()))  # the default: built on the box at an assumed 25 MB/s
    # 3.804 GB / 25 MB/s = 152.16 s; 9 GB written at 200 MB/s = 45 s; 100 s installing; 240 s nccl-tests
    assert got["image build"].seconds == pytest.approx(152.16 + 45 + 100 + 240)
    assert "assumed" in got["image build"].basis and "measured here, ÷ 4" in got["image build"].basis


def test_the_set_up_goals_hold_at_the_assumed_rate():
    """The image from wheels: ≤ 5 minutes of set-up pulling a pushed image (IMAGE=), ≤ 10 building on the
    box."""
    for image, goal_s in (("pull", 5 * 60), ("build", 10 * 60)):
        billed = sum(line.seconds for line in before(SetupAssumptions(image=image)) if line.billed)
        assert billed <= goal_s, (image, billed)


def test_host_runtime_makes_a_venv_and_no_image():
    got = lines(before(SetupAssumptions(runtime="host")))
    assert got["image"].seconds == 0.0
    assert got["venv"].seconds == pytest.approx(2.8 * GB / (25 * MB) + 100)  # torch's wheels, then installing


def test_fetch_is_billed_the_archive_is_not():
    got = lines(after(SetupAssumptions()))
    assert got["fetch"].seconds == pytest.approx(10 + 2 * GB / (12.5 * MB)) and got["fetch"].billed
    assert got["archive"].seconds == pytest.approx(2 * GB / (5 * MB)) and not got["archive"].billed


def test_the_bill_adds_set_up_stages_and_fetch():
    setup = SetupAssumptions(image="pull", download_Bps=100 * MB)
    plan = estimate(get_profile("nccl-gpu"), rate_per_hour=36.0, setup=setup)
    billed_setup = 83.04 + 14.0 + 0.0 + (10 + 160.0)  # pull, sync, venv, fetch
    assert len(plan.stages) >= 10 and plan.total_s > 0
    assert plan.billed_s == pytest.approx(plan.total_s + billed_setup)
    assert plan.cost == pytest.approx(plan.billed_s / 3600 * 36.0)
    text = render(plan)
    for step in ("image pull", "code sync", "venv", "fetch", "archive", "billed"):
        assert any(line.startswith(step) for line in text.splitlines()), step
    assert f"{plan.billed_s / 60:8.1f}" in next(
        line for line in text.splitlines() if line.startswith("billed")
    )


def test_bad_set_up_assumptions_are_refused():
    for bad in (
        SetupAssumptions(image="copy"),
        SetupAssumptions(runtime="vm"),
        SetupAssumptions(download_Bps=0),
    ):
        with pytest.raises(ValueError):
            check(bad)


def test_make_plan_gpu_names_the_model_planned_for():
    """`make plan GPU=A100` once planned 8×H100 without a word: GPU= reaches --gpu, an unknown model is
    refused."""
    import os
    import subprocess
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "GPU": "A100", "GPUS": "4"}
    done = subprocess.run(
        ["make", "-s", "plan"], cwd=root, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0 and done.stdout.startswith("plan for nccl-gpu on 4 × A100 SXM"), done.stdout[
        :200
    ]
    env["GPU"] = "B9000"
    done = subprocess.run(
        ["make", "-s", "plan"], cwd=root, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode != 0 and "GPU 'B9000'" in done.stderr
