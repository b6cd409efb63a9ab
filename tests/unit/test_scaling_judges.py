"""judge() of baseline, tp, dp and zero on hand-made rows: a wrong comparison fails, performance warns
with a reason a person can act on, and on the CPU profile the performance checks are skipped."""

from __future__ import annotations

import pytest

from suite.config import GLOO_CPU, NCCL_GPU
from suite.results import Expectation, Row
from suite.stages import baseline, dp, tp, zero

GPU = {"profile": NCCL_GPU.to_dict()}
CPU = {"profile": GLOO_CPU.to_dict()}


def status(verdicts, vid):
    found = [v for v in verdicts if v.id == vid]
    assert len(found) == 1, [v.id for v in verdicts]
    return found[0]


# ---------------------------------------------------------------- tp


def tp_rows(errors=1e-7, speedups=None, shares=None, degrees=(2, 4, 8)):
    rows = [
        Row(stage="tp", case=c, metric="max_abs_error", value=errors, unit="abs", tp=d, world=d)
        for d in degrees
        for c in tp.GOLDEN_CASES
    ]
    for d, s in (speedups or {}).items():
        rows.append(Row(stage="tp", case="train_step", metric="speedup", value=s, unit="ratio", tp=d))
    for d, s in (shares or {}).items():
        rows.append(Row(stage="tp", case="train_step", metric="comm_share", value=s, unit="ratio", tp=d))
    return rows


def test_tp_golden_passes_within_tolerance_and_fails_above():
    ok = tp.judge(tp_rows(1e-7), [], CPU)
    assert status(ok, "tp.golden.tp2").status == "pass" and status(ok, "tp.golden.tp4").status == "pass"
    rows = tp_rows(1e-7)
    rows[0] = Row(stage="tp", case="logits", metric="max_abs_error", value=0.3, unit="abs", tp=2, world=2)
    bad = tp.judge(rows, [], CPU)
    v = status(bad, "tp.golden.tp2")
    assert v.status == "fail" and "logits" in v.reason and "wrong dimension" in v.reason
    assert status(bad, "tp.golden.tp4").status == "pass"


def test_tp_golden_fails_when_a_comparison_is_missing_or_not_finite():
    rows = [r for r in tp_rows(1e-7) if not (r.tp == 4 and r.case == "grads")]
    assert status(tp.judge(rows, [], CPU), "tp.golden.tp4").status == "fail"
    rows = tp_rows(float("inf"))
    assert status(tp.judge(rows, [], CPU), "tp.golden.tp2").status == "fail"


def test_tp_stall_warns_naming_communication_and_numa():
    facts = {**GPU, "topology": {"numa_nodes": {"node0": "0-55", "node1": "56-111"}, "nvlink": True}}
    verdicts = tp.judge(tp_rows(speedups={1: 1.0, 2: 1.7, 4: 1.6}, shares={4: 0.45}), [], facts)
    v = status(verdicts, "tp.scaling")
    assert v.status == "warn" and "45%" in v.reason and "2 NUMA nodes" in v.reason
    good = tp.judge(tp_rows(speedups={1: 1.0, 2: 1.8, 4: 3.1}), [], facts)
    assert status(good, "tp.scaling").status == "pass"


def test_tp_performance_skipped_on_cpu():
    v = status(tp.judge(tp_rows(speedups={1: 1.0, 2: 0.5, 4: 0.2}), [], CPU), "tp.scaling")
    assert v.status == "skip" and "CPU" in v.reason


def test_tp_speedup_rows_use_the_baseline_then_tp1():
    rows = [
        Row(stage="tp", case="train_step", metric="step_time_s", value=v, unit="s", tp=d)
        for d, v in ((1, 0.1), (2, 0.05), (4, 0.04))
    ]
    by_baseline = {r.tp: r.value for r in tp.speedup_rows(rows, {"step_time_s": 0.08})}
    assert by_baseline == pytest.approx({1: 0.8, 2: 1.6, 4: 2.0})
    by_tp1 = {r.tp: r.value for r in tp.speedup_rows(rows, {})}
    assert by_tp1 == pytest.approx({1: 1.0, 2: 2.0, 4: 2.5})


# ---------------------------------------------------------------- dp


def dp_rows(error=1e-7, efficiency=None):
    rows = [
        Row(
            stage="dp", case="params_after_training", metric="max_abs_error", value=error, unit="abs", world=d
        )
        for d in NCCL_GPU.degrees
    ]
    for d, e in (efficiency or {}).items():
        rows.append(Row(stage="dp", case="train_step", metric="efficiency", value=e, unit="ratio", world=d))
    return rows


def dp_expectations(predicted):
    return [
        Expectation(
            stage="dp", case="train_step", metric="efficiency", value=v, unit="ratio", basis="α-β", world=d
        )
        for d, v in predicted.items()
    ]


def test_dp_golden_fail_and_pass():
    golden = {v.id: v.status for v in dp.judge(dp_rows(1e-7), [], CPU) if v.id.startswith("dp.golden")}
    assert golden == {f"dp.golden.world{d}": "pass" for d in GLOO_CPU.degrees}  # the CPU profile's degrees
    bad = dp.judge(dp_rows(2e-3), [], CPU)
    v = status(bad, "dp.golden.world4")
    assert v.status == "fail" and "gradient reduction" in v.reason


def test_dp_decay_beyond_the_model_warns():
    predicted = {1: 1.0, 2: 0.95, 4: 0.9, 8: 0.8}
    ok = dp.judge(dp_rows(efficiency={1: 1.0, 2: 0.93, 4: 0.85, 8: 0.7}), dp_expectations(predicted), GPU)
    assert status(ok, "dp.decay").status == "pass"  # 0.7 ≥ 0.8 × 0.8 = 0.64
    bad = dp.judge(dp_rows(efficiency={1: 1.0, 2: 0.93, 4: 0.85, 8: 0.5}), dp_expectations(predicted), GPU)
    v = status(bad, "dp.decay")
    assert v.status == "warn" and "8 ranks" in v.reason and "bucket" in v.reason


def test_dp_decay_without_baseline_is_skipped_with_the_fix():
    v = status(dp.judge(dp_rows(efficiency={1: 1.0, 2: 0.5}), [], GPU), "dp.decay")
    assert v.status == "skip" and "baseline" in v.reason


def test_dp_expectations_follow_the_alpha_beta_fit():
    facts = {**GPU, "baseline": {"step_time_s": 0.07}, "alpha_beta": {"alpha_s": 5e-6, "beta_Bps": 200e9}}
    exp = {e.world: e.value for e in dp.expect(NCCL_GPU, facts) if e.metric == "efficiency"}
    assert exp[1] == 1.0 and 0 < exp[8] < exp[4] < exp[2] < 1.0
    slower = {**facts, "alpha_beta": {"alpha_s": 5e-6, "beta_Bps": 20e9}}
    assert {e.world: e.value for e in dp.expect(NCCL_GPU, slower) if e.metric == "efficiency"}[8] < exp[8]
    assert not [e for e in dp.expect(NCCL_GPU, GPU) if e.metric == "efficiency"]  # no baseline: no prediction


# ---------------------------------------------------------------- zero


def zero_rows(errors=None, steps=None, peaks=None):
    rows = []
    for z in (0, 1, 2, 3):
        rows.append(
            Row(
                stage="zero",
                case="params_after_training",
                metric="max_abs_error",
                value=(errors or {}).get(z, 1e-7),
                unit="abs",
                zero=z,
                world=8,
            )
        )
        if steps:
            rows.append(
                Row(stage="zero", case="train_step", metric="step_time_s", value=steps[z], unit="s", zero=z)
            )
        if peaks:
            rows.append(
                Row(
                    stage="zero",
                    case="train_step",
                    metric="peak_memory_bytes",
                    value=peaks[z],
                    unit="bytes",
                    zero=z,
                )
            )
    return rows


def test_zero_golden_names_the_stage_that_diverged():
    verdicts = zero.judge(zero_rows(errors={3: 0.05}), [], CPU)
    v = status(verdicts, "zero.golden.zero3")
    assert v.status == "fail" and "ZeRO-3 trains something else" in v.reason
    assert status(verdicts, "zero.golden.zero0").status == "pass"


def test_zero3_slowdown_and_memory_warn():
    steps = {0: 0.10, 1: 0.11, 2: 0.12, 3: 0.14}  # 1.4× DDP
    falling = {0: 40e9, 1: 30e9, 2: 25e9, 3: 15e9}
    ok = zero.judge(zero_rows(steps=steps, peaks=falling), [], GPU)
    assert status(ok, "zero.zero3_time").status == "pass" and status(ok, "zero.memory").status == "pass"
    slow = zero.judge(zero_rows(steps={**steps, 3: 0.16}, peaks={**falling, 2: 31e9}), [], GPU)
    assert status(slow, "zero.zero3_time").status == "warn"
    v = status(slow, "zero.memory")
    assert v.status == "warn" and "ZeRO-1 to ZeRO-2" in v.reason


def test_zero_performance_skipped_on_cpu():
    verdicts = zero.judge(
        zero_rows(steps={0: 0.1, 1: 0.1, 2: 0.4, 3: 0.5}, peaks={0: 1, 1: 2, 2: 3, 3: 4}), [], CPU
    )
    assert (
        status(verdicts, "zero.zero3_time").status == "skip"
        and status(verdicts, "zero.memory").status == "skip"
    )


def test_zero_expectations_state_the_model():
    exp = {e.zero: e.value for e in zero.expect(GLOO_CPU, CPU) if e.metric == "state_memory_bytes"}
    psi = 41_280
    assert exp == {0: 16 * psi, 1: 8 * psi + 8 * psi / 4, 2: 4 * psi + 12 * psi / 4, 3: 16 * psi / 4}


# ---------------------------------------------------------------- baseline


def baseline_rows(mfu=None, device="NVIDIA H100 80GB HBM3"):
    rows = [
        Row(stage="baseline", case="train_step", metric="step_time_s", value=0.07, unit="s", tp=1),
        Row(stage="baseline", case="train_step", metric="tokens_per_s", value=117_000, unit="tokens/s", tp=1),
        Row(
            stage="baseline",
            case="train_step",
            metric="device",
            value=float("nan"),
            unit="",
            text=device,
            tp=1,
        ),
    ]
    if mfu is not None:
        rows.append(Row(stage="baseline", case="train_step", metric="mfu", value=mfu, unit="ratio", tp=1))
    return rows


def test_baseline_mfu_verdicts():
    assert status(baseline.judge(baseline_rows(0.4), [], GPU), "baseline.mfu").status == "pass"
    v = status(baseline.judge(baseline_rows(0.05), [], GPU), "baseline.mfu")
    assert v.status == "warn" and "clocks" in v.reason
    v = status(baseline.judge(baseline_rows(float("nan"), "Some New GPU"), [], GPU), "baseline.mfu")
    assert v.status == "skip" and "suite/hardware/gpus.py" in v.reason
    assert status(baseline.judge(baseline_rows(), [], CPU), "baseline.mfu").status == "skip"
    assert status(baseline.judge([], [], CPU), "baseline.measured").status == "fail"


def test_baseline_expects_step_time_from_the_topology_gpu():
    facts = {**GPU, "topology": {"gpus": ["NVIDIA H100 80GB HBM3"]}}
    exp = {e.metric: e for e in baseline.expect(NCCL_GPU, facts)}
    # 8,192 tokens × 3.0203 GFLOP = 24.74 TFLOP per step; at 20% of 989.4 TFLOP/s: 0.1250 s.
    assert exp["step_time_s"].value == pytest.approx(8192 * 3.0203e9 / (0.2 * 989.4e12), rel=1e-3)
    assert exp["parameters"].value == 536_940_544
