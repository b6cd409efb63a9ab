"""The scaling workloads on CUDA (skipped without it).

    .venv/bin/python -m pytest -q -m gpu tests/gpu/test_scaling_gpu.py

The baseline in bf16 with MFU against the card's table peak; device timing and peak memory; and,
with two or more GPUs, the TP, DP and ZeRO workers over NCCL with their golden comparisons.
"""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")]


def small_model():
    from suite.config import GptConfig

    # 8 layers of d=1024 in bf16: a step of tens of milliseconds on a current card.
    return GptConfig(
        vocab=32768,
        hidden=1024,
        layers=8,
        heads=16,
        seq_len=1024,
        batch=8,
        dtype="bfloat16",
        steps=5,
        warmup_steps=2,
    )


def sized_model(tmp_path):
    """small_model() sized to this card as baseline/tp/dp/zero size theirs (stage_fit.scaling_sized on the
    card topology reads from `nvidia-smi -q`, tests/gpu/card_facts.py)."""
    from suite.config import NCCL_GPU
    from suite.hardware.card_fit import card_bytes
    from suite.hardware.stage_fit import scaling_sized
    from tests.gpu.card_facts import live_facts

    profile = NCCL_GPU.with_overrides(nproc=torch.cuda.device_count(), degrees=(1,))
    return scaling_sized(small_model(), card_bytes(live_facts(profile, tmp_path)))[0]


def test_baseline_on_the_gpu_reports_mfu_against_the_table(tmp_path):
    from suite.hardware.gpus import gpu_for
    from suite.stages.baseline.worker import measure_baseline

    device = torch.device("cuda", 0)
    rows = {r.metric: r for r in measure_baseline(sized_model(tmp_path), device)}
    assert rows["step_time_s"].value > 0 and rows["peak_memory_bytes"].value > 0
    assert rows["peak_memory_bytes"].value <= torch.cuda.get_device_properties(0).total_memory
    gpu = gpu_for(torch.cuda.get_device_name(0))
    if gpu is not None and gpu.bf16_dense_tflops:
        assert 0 < rows["mfu"].value < 1
    else:
        assert math.isnan(rows["mfu"].value)


def test_device_timer_and_peak_memory():
    from suite.workloads.measure import PeakMemory, time_steps

    device = torch.device("cuda", 0)
    a = torch.randn(4096, 4096, device=device)
    times = time_steps(lambda: a @ a, 5, device)
    assert len(times) == 5 and all(t > 0 for t in times)
    with PeakMemory(device) as memory:
        b = torch.empty(256 * 2**20, dtype=torch.uint8, device=device)
        del b
    assert memory.peak_bytes >= 256 * 2**20


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
@pytest.mark.parametrize(
    "module, args",
    [
        ("suite.stages.tp.worker", ["--degrees", "1,2"]),
        ("suite.stages.dp.worker", ["--degrees", "1,2"]),
        ("suite.stages.zero.worker", ["--stages", "0,1,2,3"]),
        # The paths a multi-node run takes: node rows over NCCL, ZeRO on a DeviceMesh of ranks 0..d−1 below
        # the world.
        ("suite.stages.dp.worker", ["--degrees", "1,2", "--record-nodes"]),
        ("suite.stages.zero.worker", ["--stages", "0,1,2,3", "--degrees", "1,2", "--record-nodes"]),
    ],
)
def test_partitioned_runs_match_one_process_on_nccl(tmp_path, module, args):
    from suite.config import NCCL_GPU
    from suite.costmodel.tolerance import golden_tolerance
    from suite.launch.torchrun import run_torchrun
    from suite.workloads.worker_cli import model_args

    profile = NCCL_GPU.with_overrides(nproc=2, degrees=(1, 2))
    cfg = sized_model(tmp_path)
    rows = run_torchrun(
        profile, module, [*model_args(cfg), *args], raw_dir=tmp_path, nproc=2, timeout_s=600
    ).rows()
    errors = [r.value for r in rows if r.metric == "max_abs_error"]
    # one comparison after warm-up + timed steps, loss scaled by ln V: the loosest bound
    bound = golden_tolerance(cfg, cfg.warmup_steps + cfg.steps, scale=max(1.0, math.log(cfg.vocab))).bound
    assert errors and all(e <= bound for e in errors), (errors, bound)
    assert [r for r in rows if r.metric == "step_time_s" and r.value > 0]
