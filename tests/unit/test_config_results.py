"""Profiles validate at construction; the run directory's files round-trip and replace per stage."""

import json
import math

import pytest

from suite.config import GLOO_CPU, NCCL_GPU, ProfileError, get_profile, profile_from_dict
from suite.results import Expectation, Row, RunDir, Verdict


def test_profiles_round_trip_through_the_manifest():
    for profile in (GLOO_CPU, NCCL_GPU):
        assert profile_from_dict(json.loads(json.dumps(profile.to_dict()))) == profile


def test_validation_names_what_to_change():
    with pytest.raises(ProfileError, match="TP degree 3 must divide heads 4"):
        GLOO_CPU.with_overrides(degrees=(1, 3))
    with pytest.raises(ProfileError, match="degrees \\[8\\] exceed nproc 4"):
        GLOO_CPU.with_overrides(degrees=(1, 8))
    with pytest.raises(ProfileError, match="unknown: choose one of gloo-cpu, nccl-gpu"):
        get_profile("tpu-pod")


def test_nproc_override_drops_degrees_that_no_longer_fit():
    four_cards = get_profile("nccl-gpu", nproc=4)
    assert four_cards.nproc == 4 and four_cards.degrees == (1, 2, 4)


def test_sweep_sizes_are_powers_of_the_factor():
    sizes = NCCL_GPU.sweep.sizes()
    assert sizes[0] == 8 and sizes[-1] == 8 * 1024**3 and len(sizes) == 31
    assert GLOO_CPU.sweep.sizes()[-1] <= 4 * 1024**2


def test_rows_expectations_verdicts_round_trip(tmp_path):
    run = RunDir.create(tmp_path / "r", {"run_id": "r"})
    rows = [
        Row(stage="s", case="c", metric="busbw", value=1.5, unit="GB/s", size_bytes=2**33, rank=0),
        Row(stage="s", case="c", metric="error", value=float("nan"), unit="", text="RuntimeError: x"),
    ]
    run.replace_stage_rows("s", rows)
    back = RunDir.load(run.path).rows()
    assert back[0] == rows[0]
    assert back[1].text == "RuntimeError: x" and math.isnan(back[1].value)
    e = Expectation(
        stage="s", case="c", metric="busbw", value=2.0, unit="GB/s", basis="ring α-β", size_bytes=8
    )
    run.replace_stage_expectations("s", [e])
    assert run.expectations() == [e]
    v = Verdict(id="s.x", stage="s", status="warn", expected="a", observed="b", reason="<b>markup</b>")
    run.replace_stage_verdicts("s", [v])
    run.replace_stage_verdicts("t", [])
    assert run.verdicts() == [v]
    with pytest.raises(ValueError, match="verdict status"):
        Verdict(id="s.y", stage="s", status="meh", expected="", observed="", reason="")


def test_creating_over_an_existing_run_is_refused(tmp_path):
    RunDir.create(tmp_path / "r", {})
    with pytest.raises(FileExistsError, match="--resume"):
        RunDir.create(tmp_path / "r", {})
