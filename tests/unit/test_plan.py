"""suite/plan/hours.py: stage durations on the GPU profile from sweep sizes, iterations, the α-β model and
link peaks."""

from __future__ import annotations

import pytest

from suite.__main__ import main as suite_main
from suite.config import NCCL_GPU, SweepConfig, get_profile
from suite.hardware.gpus import gpu_for
from suite.plan.hours import PlanAssumptions, estimate, render, step_compute_s, sweep_time_s
from suite.stages import available
from suite.stages.bandwidth import COLLECTIVES as BANDWIDTH_COLLECTIVES

ORDER = tuple(available("nccl-gpu"))  # the stages the multi-card profile runs (a stage declares its PROFILES)


def test_every_stage_is_planned_in_run_order():
    plan = estimate(NCCL_GPU)
    assert [s.stage for s in plan.stages] == list(ORDER)
    assert all(s.seconds > 0 for s in plan.stages)
    assert plan.total_s == pytest.approx(sum(s.seconds for s in plan.stages))


def test_sweep_time_is_the_alpha_beta_model_summed_over_sizes():
    # 8 ranks, α = 5 µs, β = 450 GB/s, two sizes, 25 repeats, 2 placements:
    # all_reduce 1 KiB: 2·7·(5e-6 + 1024/(8·450e9)) = 70.004 µs; 1 GiB: 2·7·(5e-6 + 2^30/(3.6e12)) = 4.2457 ms
    t = sweep_time_s("all_reduce", [1024, 2**30], 8, 5e-6, 450e9, repeats=25)
    by_hand = 50 * (14 * (5e-6 + 1024 / 3.6e12) + 14 * (5e-6 + 2**30 / 3.6e12))
    assert t == pytest.approx(by_hand)
    assert t == pytest.approx(50 * (70.004e-6 + 4.2457e-3), rel=1e-4)


def test_bandwidth_stage_adds_launches_to_the_bus_time():
    tiny = NCCL_GPU.with_overrides(
        sweep=SweepConfig(min_bytes=8, max_bytes=32, factor=2, warmup_iters=1, iters=1)
    )
    a = PlanAssumptions(nccl_tests_launch_s=10.0, torchrun_launch_s=20.0)
    bw = next(s for s in estimate(tiny, a).stages if s.stage == "bandwidth")
    beta = gpu_for("NVIDIA H100 80GB HBM3").nvlink_full_GBps * 1e9  # 450 GB/s
    bus = sum(
        sweep_time_s(c, [8, 16, 32], 8, 5e-6, beta, 2)
        + sweep_time_s(c, [8, 16, 32], 8, 5e-6, beta, 2, placements=1)
        for c in BANDWIDTH_COLLECTIVES
    )
    assert bw.seconds == pytest.approx(6 * 10.0 + 20.0 + bus)


def test_step_time_follows_flops_peak_and_mfu():
    # 3.02 GFLOP/token (gpt.py's docstring) × 8,192 tokens ÷ (989.4 TFLOP/s × 0.35) ≈ 71 ms
    t = step_compute_s(NCCL_GPU, 989.4e12, 0.35)
    assert 0.06 < t < 0.10
    assert step_compute_s(NCCL_GPU, 989.4e12, 0.7) == pytest.approx(t / 2)


def test_slower_links_and_fewer_gpus_change_the_plan():
    h100 = estimate(NCCL_GPU)
    a100 = estimate(NCCL_GPU, PlanAssumptions(gpu_name="NVIDIA A100-SXM4-80GB"))
    assert a100.beta_Bps == pytest.approx(300e9) and h100.beta_Bps == pytest.approx(450e9)
    assert a100.total_s > h100.total_s
    four = estimate(get_profile("nccl-gpu", 4))
    assert four.gpus == 4 and [s.stage for s in four.stages] == list(ORDER)


def test_cost_at_a_rate_and_the_one_hour_goal():
    plan = estimate(NCCL_GPU, rate_per_hour=24.0)
    assert plan.cost == pytest.approx(plan.billed_s / 3600 * 24.0)  # the set-up and fetch are paid for too
    assert plan.billed_s > plan.total_s
    assert plan.fits_one_hour, render(plan)  # the checklist's goal for the shipped GPU profile
    text = render(plan)
    assert "cost at $24/hour" in text and "fits the goal of one hour" in text


def test_unknown_gpu_names_the_flag():
    with pytest.raises(ValueError, match="--beta|--gpu"):
        estimate(NCCL_GPU, PlanAssumptions(gpu_name="Imaginary X1"))


def test_cli_plan(capsys):
    assert suite_main(["plan", "--profile", "nccl-gpu", "--gpus", "8", "--rate", "30"]) == 0
    out = capsys.readouterr().out
    assert "plan for nccl-gpu on 8 × H100 SXM" in out and "cost at $30/hour: $" in out
    for stage in ORDER:
        assert f"\n{stage:<10}" in out
    # argparse's own usage error: the price is checked as it is read
    with pytest.raises(SystemExit) as refused:
        suite_main(["plan", "--rate", "-1"])
    assert refused.value.code == 2
