"""Tiers: the quick tier's plan on 8×H100 within 10 minutes, standard = every stage and a 10-minute burn-in,
soak an hour or BURNIN_MIN, the burn-in's hard timeout growing with it; --recheck picks what failed."""

from __future__ import annotations

import pytest

from suite import stages
from suite.config import GLOO_CPU, get_profile
from suite.plan import tiers
from suite.plan.hours import PlanAssumptions, estimate, render
from suite.results import RunDir
from tests.factories import verdict


def plan_for(tier: str, environ=None):
    profile, chosen = tiers.apply(get_profile("nccl-gpu", 8), tier, environ or {})
    return (
        profile,
        chosen,
        estimate(profile, PlanAssumptions(gpu_name="NVIDIA H100 80GB HBM3"), only=tuple(chosen), tier=tier),
    )


def test_quick_fits_ten_minutes_on_eight_h100():
    profile, chosen, plan = plan_for("quick")
    assert chosen == ["health", "topology", "bandwidth", "burnin"]
    assert profile.section("burnin").seconds == 120.0 and [s.stage for s in plan.stages] == chosen
    assert plan.total_s <= tiers.QUICK_GOAL_S, render(plan)
    assert "within its 10-minute goal" in render(plan)


def test_standard_is_the_whole_checklist_and_ten_minutes_of_burn_in():
    profile, chosen, plan = plan_for("standard")
    assert chosen == stages.available("nccl-gpu") and profile.section("burnin").seconds == 600.0
    assert profile.timeout_for("burnin") == 600.0 + tiers.TIMEOUT_MARGIN_S


def test_soak_is_an_hour_or_burnin_min():
    profile, chosen, _ = plan_for("soak")
    assert chosen == ["health", "topology", "burnin"] and profile.section("burnin").seconds == 3600.0
    profile, _, plan = plan_for("soak", {"BURNIN_MIN": "240"})
    assert (
        profile.section("burnin").seconds == 240 * 60
        and profile.timeout_for("burnin") == 240 * 60 + tiers.TIMEOUT_MARGIN_S
    )
    assert "OVER the one-hour goal" not in render(plan)
    for bad in ("ten", "0", "-5"):
        with pytest.raises(tiers.TierError, match="BURNIN_MIN"):
            tiers.apply(get_profile("nccl-gpu", 8), "soak", {"BURNIN_MIN": bad})


def test_the_rehearsal_keeps_its_own_burn_in():
    profile, chosen = tiers.apply(GLOO_CPU, "quick", {"BURNIN_MIN": "60"})
    assert profile.section("burnin") == GLOO_CPU.section("burnin") and "burnin" in chosen


def test_recheck_reruns_only_what_failed(tmp_path):
    selected = ["health", "topology", "bandwidth", "burnin"]
    run = RunDir.create(
        tmp_path / "run",
        {
            "stages_selected": selected,
            "profile": {},
            "facts": {},
            "host": {},
            "stages": {s: {"status": "complete", "attempt": 1} for s in selected},
        },
    )
    run.manifest["stages"]["bandwidth"]["status"] = "error"
    run.save_manifest()
    run.write_verdicts_all(
        [
            verdict("burnin.sdc.bfloat16", "fail"),
            verdict("health.ecc", "warn"),
            verdict("topology.gpus", "pass"),
        ]
    )
    assert tiers.failed_stages(run.path) == ["bandwidth", "burnin"]
