"""The nccl-1gpu profile: one process, NCCL, CUDA; the stages that declare it, and only those, run and
plan."""

from __future__ import annotations

import dataclasses
import json

import pytest

from suite import stages
from suite.config import NCCL_1GPU, PROFILES, ProfileError, get_profile, profile_from_dict
from suite.plan.hours import estimate
from suite.stage_contract import StageDeclarationError

ONE_CARD_STAGES = ["health", "topology", "baseline", "burnin", "memory", "precision", "nccl1gpu", "pinned"]


def test_the_profile_is_one_process_of_nccl_on_cuda():
    p = get_profile("nccl-1gpu")
    assert (p.name, p.backend, p.device, p.nproc, p.degrees) == ("nccl-1gpu", "nccl", "cuda", 1, (1,))
    assert p.judge_performance and "nccl-1gpu" in PROFILES
    with pytest.raises(ProfileError, match="one process on one card"):
        get_profile("nccl-1gpu", nproc=2)
    assert profile_from_dict(json.loads(json.dumps(p.to_dict()))) == p


def test_its_stages_are_the_ones_that_declare_it():
    assert stages.available("nccl-1gpu") == ONE_CARD_STAGES
    multi = stages.available("gloo-cpu")
    assert {"bandwidth", "tp", "fault"} <= set(multi) and set(ONE_CARD_STAGES) <= set(multi)
    assert stages.available("nccl-gpu") == [s for s in stages.available() if s != "nccl1gpu"]
    assert stages.select(None, "nccl-1gpu") == ONE_CARD_STAGES
    assert stages.select("pinned,memory", "nccl-1gpu") == ["memory", "pinned"]
    with pytest.raises(stages.StageSelectionError, match="do not run on profile nccl-1gpu"):
        stages.select("memory,tp", "nccl-1gpu")


def test_plan_counts_only_the_profiles_stages():
    plan = estimate(NCCL_1GPU)
    assert [s.stage for s in plan.stages] == ONE_CARD_STAGES and plan.gpus == 1
    assert all(s.seconds > 0 for s in plan.stages) and plan.fits_one_hour


def test_a_stage_naming_an_unknown_profile_is_refused():
    memory = stages.declaration("memory")
    with pytest.raises(
        StageDeclarationError,
        match=r"profiles=\('gloo-cpu', 'nccl-8gpu'\) must name .* "
        r"each one of gloo-cpu, nccl-gpu",
    ):
        dataclasses.replace(memory, profiles=("gloo-cpu", "nccl-8gpu"))
    with pytest.raises(StageDeclarationError, match="profiles='nccl-1gpu' must be a tuple of names"):
        dataclasses.replace(memory, profiles="nccl-1gpu")
    with pytest.raises(StageDeclarationError, match=r"profiles=\(\) must name at least one profile"):
        dataclasses.replace(memory, profiles=())
