"""The scaling stages' arithmetic: GPU peaks and MFU, the DP decay and ZeRO memory model, the measurement
helpers (communication from real traces, CPU peak memory), and the golden comparison's error function."""

from __future__ import annotations

import dataclasses
import gzip
import json
import math
from pathlib import Path

import pytest
import torch

from suite.config import GLOO_CPU, NCCL_GPU
from suite.costmodel.mfu import mfu
from suite.costmodel.scaling_expectations import dp_efficiency, dp_step_s, model_state_bytes
from suite.costmodel.sizing import FLOPS_FORMULA, flops_per_token, parameter_count, training_flops_per_token
from suite.costmodel.tolerance import golden_tolerance, tolerance
from suite.hardware.gpus import gpu_for
from suite.results import Row
from suite.workloads.golden import max_abs_error, max_abs_error_many
from suite.workloads.measure import (
    PeakMemory,
    communication_us,
    is_communication,
    peak_from_memory_events,
    time_steps,
    union_us,
)

TRACES = Path(__file__).resolve().parent.parent / "data" / "traces"


# ---------------------------------------------------------------- peaks and MFU


def test_unknown_gpu_gets_no_peak_and_no_mfu():
    assert gpu_for("Tesla V100-SXM2-32GB").bf16_dense_flops is None  # no bf16 tensor cores: no bf16 peak
    assert gpu_for("cpu") is None
    assert math.isnan(mfu(3.42e9, 1e5, float("nan")))
    assert math.isnan(mfu(3.42e9, 1e5, 0.0))


def test_mfu_is_model_flops_per_second_over_peak():
    # The nccl-gpu model: 3.02 GFLOP per token; 120,000 tokens/s on an H100 SXM.
    flops = training_flops_per_token(NCCL_GPU.model)
    assert flops == pytest.approx(3.0203e9, rel=1e-4)
    achieved = flops * 120_000  # 362.4 TFLOP/s
    assert mfu(flops, 120_000, gpu_for("NVIDIA H100 80GB HBM3").bf16_dense_flops) == pytest.approx(
        achieved / 989.4e12
    )
    assert mfu(1e9, 1e3, 1e13) == pytest.approx(0.1)


def test_flops_per_token_reproduces_palm_540b_published_mfu():
    # PaLM (Chowdhery et al. 2022, arXiv:2204.02311): 540.35 B parameters, 118 layers, 48 heads × 256 = 12,288
    # attention width, sequence 2048, input and output embeddings shared (so every parameter is a matmul's);
    # 238.3 K tokens/s on 6144 TPU v4 chips (275 TFLOP/s bf16 each) is, the paper says, 46.2 % MFU.
    flops = flops_per_token(540.35e9, 118, 48 * 256, 2048)
    assert flops == pytest.approx(6 * 540.35e9 + 12 * 118 * 12288 * 2048)
    assert mfu(flops, 238.3e3, 6144 * 275e12) == pytest.approx(0.462, abs=5e-4)


def test_training_flops_leave_the_input_embedding_out_and_keep_an_untied_head():
    # nccl-gpu: N = 536,940,544 of which V·d = 32768 × 2048 = 67,108,864 is the input embedding (a lookup): 6
    # × 469,831,680 + 12 × 8 × 2048 × 1024 = 2.819 G + 0.201 G = 3.0203 GFLOP (6N would say 3.4228 G, 13 %
    # high).
    cfg = NCCL_GPU.model
    assert training_flops_per_token(cfg) == 6 * (536_940_544 - 67_108_864) + 12 * 8 * 2048 * 1024
    # a tied head: the one V·d matrix is the output matmul, so nothing is left out: 6N + 12·L·d·T
    tied = dataclasses.replace(cfg, tied_head=True)
    assert training_flops_per_token(tied) == 6 * parameter_count(tied) + 12 * 8 * 2048 * 1024
    assert "6·(N − V·d) + 12·L·d·T" in FLOPS_FORMULA


def test_model_sizes_stated_in_the_docs():
    assert parameter_count(GLOO_CPU.model) == 41_280
    assert parameter_count(NCCL_GPU.model) == 536_940_544


# ---------------------------------------------------------------- DP and ZeRO model


def test_dp_prediction_by_hand():
    # t1 = 70 ms, 8 ranks, 1 GB of gradients, α = 5 µs, β = 200 GB/s:
    # ring all-reduce = 2·7·(5e-6 + 1e9/(8·200e9)) = 14·(5e-6 + 6.25e-4) = 8.82 ms; step = 8.75 + 8.82 ms.
    step = dp_step_s(0.070, 8, 1e9, 5e-6, 200e9)
    assert step == pytest.approx(0.00875 + 0.00882)
    assert dp_efficiency(0.070, 8, 1e9, 5e-6, 200e9) == pytest.approx(0.00875 / (0.00875 + 0.00882))
    assert dp_efficiency(0.070, 1, 1e9, 5e-6, 200e9) == 1.0


def test_zero_memory_model_per_dtype():
    psi, n = 1_000_000, 4
    assert model_state_bytes(psi, n, 0, "float32") == 16 * psi  # 4 + 4 + 8
    assert model_state_bytes(psi, n, 1, "float32") == 8 * psi + 8 * psi / n
    assert model_state_bytes(psi, n, 2, "float32") == 4 * psi + 12 * psi / n
    assert model_state_bytes(psi, n, 3, "float32") == 16 * psi / n
    assert model_state_bytes(psi, n, 0, "bfloat16") == 8 * psi  # 2 + 2 + 4: AdamW's moments in bf16


# ---------------------------------------------------------------- measurement helpers


def test_union_counts_overlaps_once():
    assert union_us([(0, 10), (5, 15), (20, 25)]) == 20
    assert union_us([(0, 10), (2, 3)]) == 10
    assert union_us([]) == 0


def test_communication_from_a_real_nccl_trace():
    events = json.loads(gzip.open(TRACES / "hta-sampled_rank-0.json.gz").read())["traceEvents"]
    comm = [e for e in events if is_communication(e)]
    assert comm and all(e["name"].startswith("ncclKernel_") and e["cat"] == "kernel" for e in comm)
    assert len(comm) == 10  # the trace's ten SendRecv kernels; CPU-side record_param_comms are not counted
    assert communication_us(events) == pytest.approx(396_199.0)  # their durations summed (none overlap)


def test_communication_from_a_real_gloo_trace():
    events = json.loads(gzip.open(TRACES / "gloo-cpu-ddp_rank0.trace.json.gz").read())["traceEvents"]
    names = {e["name"] for e in events if e.get("ph") == "X" and is_communication(e)}
    assert names and all(n.startswith("gloo:") for n in names)
    span = max(e["ts"] + e.get("dur", 0) for e in events if e.get("ph") == "X") - min(
        e["ts"] for e in events if e.get("ph") == "X"
    )
    assert 0 < communication_us(events) < span


def test_peak_from_memory_events_reads_the_running_total():
    def ev(ts, nbytes, total):
        return {
            "name": "[memory]",
            "ts": ts,
            "args": {"Bytes": nbytes, "Total Allocated": total, "Device Type": 0},
        }

    # 1000 bytes already tracked from an earlier region: +400, +600, −400, +100 → peak 1000 above the start.
    events = [ev(1, 400, 1400), ev(2, 600, 2000), ev(3, -400, 1600), ev(4, 100, 1700)]
    assert peak_from_memory_events(events) == 1000
    assert peak_from_memory_events([]) == 0


def test_cpu_peak_memory_sees_a_transient_tensor():
    n = 1_000_000  # 4 MB of float32, freed inside the region: the peak must still count it
    with PeakMemory(torch.device("cpu")) as memory:
        kept = torch.ones(1000)
        transient = torch.zeros(n)
        total = float(transient.sum())
        del transient
    assert total == 0.0 and kept.numel() == 1000
    assert 4 * n <= memory.peak_bytes < 4 * n + 1_000_000


def test_time_steps_times_each_step_on_cpu():
    calls = []
    times = time_steps(lambda: calls.append(1), 3, torch.device("cpu"))
    assert len(times) == 3 and len(calls) == 3 and all(t >= 0 for t in times)


# ---------------------------------------------------------------- golden comparison


def test_max_abs_error():
    a = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    assert max_abs_error(a, a.clone()) == 0.0
    assert max_abs_error(a + torch.tensor([[0.0, 0.5], [0.0, -0.25]]), a) == 0.5
    assert max_abs_error(torch.ones(3), torch.ones(4)) == math.inf  # different element counts never pass
    assert max_abs_error(a.reshape(4), a) == 0.0  # same values, another layout: compared as `want` is shaped
    assert max_abs_error(torch.tensor([float("nan")]), torch.tensor([1.0])) == math.inf
    assert max_abs_error_many([(a, a), (a + 1, a)]) == 1.0


def test_tolerance_per_dtype():
    assert tolerance("float32") == 1e-4
    assert tolerance("bfloat16") > tolerance("float16") > tolerance("float32") > tolerance("float64")
    with pytest.raises(ValueError, match="TOLERANCE"):
        tolerance("int8")


def test_golden_tolerance_follows_model_size_dtype_and_steps():
    cpu, gpu = GLOO_CPU.model, NCCL_GPU.model
    # gloo-cpu after 1 + 3 steps: depth 6, K = 256 → 6 × 16 × 2⁻²⁴ × 5 = 2.86e-5 relative
    small = golden_tolerance(cpu, 4)
    assert small.rtol == pytest.approx(6 * 16 * 2**-24 * 5)
    assert small.atol == pytest.approx(1e-3 * 4 * 6 * 16 * 2**-24)
    # nccl-gpu after 3 + 10 steps: depth 18, K = 32768 (the vocabulary) → 2.7e-3
    big = golden_tolerance(gpu, 13)
    assert big.bound == pytest.approx(18 * math.sqrt(32768) * 2**-24 * (14 + 13e-3))
    # the 41 K-parameter calibration would hold 537 M parameters far too tight
    assert big.bound > 50 * small.bound
    assert golden_tolerance(cpu, 4, dtype="bfloat16").bound == pytest.approx(small.bound * 2**16)
    assert golden_tolerance(cpu, 10).bound > small.bound > golden_tolerance(cpu, 0).bound
    assert golden_tolerance(cpu, 0, scale=math.log(256)).bound == pytest.approx(
        golden_tolerance(cpu, 0).rtol * math.log(256)
    )
    assert "K = 256" in small.describe() and "4 steps" in small.describe() and "rtol" in small.describe()
    with pytest.raises(ValueError, match="UNIT_ROUNDOFF"):
        golden_tolerance(cpu, 1, dtype="int8")


def test_each_golden_verdict_records_the_tolerance_it_used():
    from suite.stages import dp, tp, zero

    def params_row(stage, value, **key):
        return Row(
            stage=stage, case="params_after_training", metric="max_abs_error", value=value, unit="abs", **key
        )

    gpu = {"profile": NCCL_GPU.to_dict()}
    cpu = {"profile": GLOO_CPU.to_dict()}
    # 1e-3 after 13 float32 AdamW steps of the 537 M model is rounding; after 4 steps of the 41 K model it is
    # a mistake
    v = {x.id: x for x in dp.judge([params_row("dp", 1e-3, world=d) for d in NCCL_GPU.degrees], [], gpu)}
    assert v["dp.golden.world8"].status == "pass" and "K = 32768" in v["dp.golden.world8"].expected
    v = {x.id: x for x in dp.judge([params_row("dp", 1e-3, world=d) for d in GLOO_CPU.degrees], [], cpu)}
    assert v["dp.golden.world4"].status == "fail" and "atol" in v["dp.golden.world4"].expected
    v = {x.id: x for x in zero.judge([params_row("zero", 1e-6, zero=z) for z in zero.ZERO_STAGES], [], cpu)}
    assert all("rtol" in x.expected and x.status == "pass" for k, x in v.items() if ".golden." in k)
    rows = [
        Row(stage="tp", case=c, metric="max_abs_error", value=2e-5, unit="abs", tp=2, world=2)
        for c in tp.GOLDEN_CASES
    ]
    got = {x.id: x for x in tp.judge(rows, [], {"profile": GLOO_CPU.to_dict()})}["tp.golden.tp2"]
    assert got.status == "fail" and "0 steps" in got.expected  # one forward and backward: 5.7e-6
    loss_only = [Row(**{**r.to_dict(), "value": 2e-5 if r.case == "loss" else 1e-7}) for r in rows]
    # the loss scales by ln V
    assert {x.id: x for x in tp.judge(loss_only, [], cpu)}["tp.golden.tp2"].status == "pass"
    exp = {(e.case, e.world): e for e in dp.expect(NCCL_GPU, gpu) if e.metric == "max_abs_error"}
    assert exp[("params_after_training", 8)].value == pytest.approx(
        golden_tolerance(NCCL_GPU.model, 13).bound
    )
