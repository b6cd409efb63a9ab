"""The cp and ep stages' pure parts: their config checks, the bytes formula, the tolerances, the plan
entry, the capacity rule (on a routing worked out by hand), and judge() on missing or wrong rows."""

from __future__ import annotations

import math

import pytest
import torch

from suite.config import GLOO_CPU, NCCL_GPU, ProfileError
from suite.plan.hours import estimate
from suite.results import Row
from suite.stages import cp as cp_stage
from suite.stages import ep as ep_stage
from suite.stages.ep.moe_routing import capacity_of, within_capacity

FACTS = {"profile": GLOO_CPU.to_dict()}


def test_cp_config_refuses_degrees_that_do_not_divide_heads_or_lengths():
    with pytest.raises(ProfileError, match="divide cp.heads"):
        cp_stage.CpConfig(heads=6, degrees=(4,))
    with pytest.raises(ProfileError, match="not divisible by CP = 4"):
        cp_stage.CpConfig(heads=8, degrees=(4,), golden_seq_len=66)


def test_cp_forward_bytes_by_hand():
    cfg = cp_stage.CpConfig(batch=1, heads=4, head_dim=16, golden_seq_len=64, seq_lens=(64,), degrees=(4,))
    shard = 1 * 4 * 16 * 16 * 4  # B·H·(S/P)·D float32 = 4096 bytes
    assert cp_stage.forward_bytes("ring", cfg, 4) == 3 * 2 * shard == 24576  # 3 rotations of K and V
    assert cp_stage.forward_bytes("ulysses", cfg, 4) == (4 * shard + 4 * 16 * 4) * 3 // 4 == 12480


def test_cp_tolerance_is_derived_and_recorded():
    tols = cp_stage.tolerances(GLOO_CPU.section("cp"), 4)
    assert tols["output"].bound == pytest.approx(14 * math.sqrt(64) * 2**-24)  # depth 2·(3+4), K = S = 64
    assert tols["lse"].bound == pytest.approx(tols["output"].bound * (math.log(64) + 1))
    expected = {e.case: e.basis for e in cp_stage.expect(GLOO_CPU, {}) if e.metric == "max_abs_error"}
    assert len(expected) == 10 and all("drill_tolerance.py" in b for b in expected.values())


def test_cp_judge_fails_missing_and_wrong_rows():
    verdicts = {v.id: v for v in cp_stage.judge([], [], FACTS)}
    assert (
        verdicts["cp.golden.ring.cp2"].status == "fail"
        and "not compared" in verdicts["cp.golden.ring.cp2"].reason
    )
    assert verdicts["cp.comm_volume.ulysses.cp4"].status == "fail"
    assert verdicts["cp.overlap"].status == "skip"
    tol = cp_stage.tolerances(GLOO_CPU.section("cp"), 2)
    rows = [
        Row(
            stage="cp",
            case=f"{m}.{q}",
            metric="max_abs_error",
            value=tol[q].bound / 2,
            unit="abs",
            algo="ring",
            world=2,
        )
        for m in cp_stage.MASKS
        for q in cp_stage.QUANTITIES
    ]
    assert {v.id: v.status for v in cp_stage.judge(rows, [], FACTS)}["cp.golden.ring.cp2"] == "pass"
    rows[3] = Row(
        stage="cp",
        case=rows[3].case,
        metric="max_abs_error",
        value=tol["dk"].bound * 2,
        unit="abs",
        algo="ring",
        world=2,
    )
    verdict = {v.id: v for v in cp_stage.judge(rows, [], FACTS)}["cp.golden.ring.cp2"]
    assert verdict.status == "fail" and "full.dk" in verdict.reason


def test_ep_config_and_run_refuse_bad_sizes():
    with pytest.raises(ProfileError, match="top_k"):
        ep_stage.EpConfig(top_k=0)


def test_capacity_keeps_first_choices_before_second_choices():
    # Three tokens, two experts, top-2: every token picks both; expert 0 is every token's first choice.
    experts = torch.tensor([[0, 1], [0, 1], [1, 0]])
    assert capacity_of(0.5, 3, 2, 2) == 2  # ⌈0.5·3·2/2⌉
    kept = within_capacity(experts, 2, capacity=2)
    # slot-major order: (t0,e0) (t1,e0) (t2,e1) | (t0,e1) (t1,e1) (t2,e0): expert 0 full after t0, t1; expert
    # 1 after t2, t0
    assert kept.tolist() == [[True, True], [True, False], [True, False]]
    assert within_capacity(experts, 2, capacity=capacity_of(0, 3, 2, 2)).all()


def test_ep_judge_fails_token_mismatches_and_missing_rows():
    assert {v.id: v.status for v in ep_stage.judge([], [], FACTS)}["ep.golden.uniform"] == "fail"
    tols = ep_stage.tolerances(GLOO_CPU.section("ep"), 4)
    rows = [
        Row(stage="ep", case=f"uniform.{q}", metric="max_abs_error", value=0.0, unit="abs")
        for q in ep_stage.QUANTITIES
    ]
    counts = {"token_set_mismatches": 0, "assignments": 250, "dropped": 6, "dropped_reference": 6}
    rows += [Row(stage="ep", case="uniform", metric=m, value=v, unit="count") for m, v in counts.items()]
    assert ep_stage.golden_verdict(rows, "uniform", tols).status == "pass"
    wrong = [
        Row(stage="ep", case="uniform", metric="token_set_mismatches", value=4, unit="count")
        if r.metric == "token_set_mismatches"
        else r
        for r in rows
    ]
    verdict = ep_stage.golden_verdict(wrong, "uniform", tols)
    assert verdict.status == "fail" and "4 tokens at the wrong expert" in verdict.reason


def test_the_plan_estimates_both_on_eight_gpus():
    plan = {s.stage: s for s in estimate(NCCL_GPU).stages}
    assert 0 < plan["cp"].seconds < 600 and "CP = 2/4/8" in plan["cp"].basis
    assert 0 < plan["ep"].seconds < 600 and "EP = 8" in plan["ep"].basis


def test_comparing_plain_tensors_does_not_import_dtensor():
    # The drills' workers compare plain tensors; importing torch.distributed.tensor just to ask isinstance
    # cost each rank ~0.9 s of CPU (measured on gloo).
    import subprocess
    import sys

    code = (
        "import sys, torch\nfrom suite.workloads.golden import max_abs_error, full\n"
        "assert max_abs_error(full(torch.ones(3)), torch.zeros(3)) == 1.0\n"
        "print('torch.distributed.tensor' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"


def test_cp_on_one_process_is_a_skip_not_a_failure():
    one = GLOO_CPU.with_overrides(nproc=1, degrees=(1,))
    assert cp_stage.degrees(one) == [] and cp_stage.expect(one, {}) == []
    verdicts = cp_stage.judge([], [], {"profile": one.to_dict()})
    assert [(v.id, v.status) for v in verdicts] == [("cp.golden", "skip")]
