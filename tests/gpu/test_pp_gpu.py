"""The pp stage's GPU face (skipped without CUDA).

    .venv/bin/python -m pytest -q -m gpu tests/gpu/test_pp_gpu.py

One card: the CUDA-event busy clock against the host's wall clock, and the stage's own refusal of a
one-rank pipeline (NCCL refuses two ranks on one device, so PP cannot run on one GPU). Two or more
cards: the worker over NCCL at PP = 2 — golden check of every schedule, the sleep-stage bubble at a few
M, and the GPT's step time, CUDA-event bubble and activation memory per stage.
"""

from __future__ import annotations

import dataclasses
import time

import pytest

torch = pytest.importorskip("torch")

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")]


def test_the_cuda_event_clock_counts_gpu_time_not_host_waits():
    from suite.stages.pp.bubble import BusyClock

    device = torch.device("cuda", 0)
    a = torch.randn(4096, 4096, device=device)
    clock = BusyClock("cuda", device)
    work = clock.timed(lambda: [a @ a for _ in range(20)])
    torch.cuda.synchronize(device)
    t0 = time.perf_counter()
    work()
    time.sleep(0.2)  # the host idles: not busy time of the card
    work()
    torch.cuda.synchronize(device)
    wall = time.perf_counter() - t0
    busy = clock.busy_s()
    assert 0 < busy < wall - 0.15


def test_one_gpu_skips_the_stage_saying_why():
    from suite.config import get_profile
    from suite.stages import pp

    (verdict,) = pp.judge([], [], {"profile": get_profile("nccl-gpu", 1).to_dict()})
    assert verdict.status == "skip" and "Duplicate GPU" in verdict.reason


@pytest.mark.skipif(
    torch.cuda.device_count() < 2, reason="needs two GPUs (a pipeline needs two ranks, one per card)"
)
def test_pp_worker_over_nccl(tmp_path):
    from suite.config import GptConfig, get_profile
    from suite.launch.torchrun import run_torchrun
    from suite.stages import pp
    from tests.gpu.card_facts import live_facts

    model = GptConfig(
        vocab=32768,
        hidden=1024,
        layers=8,
        heads=16,
        seq_len=1024,
        batch=8,
        dtype="bfloat16",
        steps=3,
        warmup_steps=1,
    )
    profile = get_profile("nccl-gpu", 2).with_overrides(model=model)
    profile = profile.with_overrides(
        pp=dataclasses.replace(
            profile.section("pp"),
            layers=0,
            bubble_microbatches=(2, 4),
            timed_microbatches=(4,),
            golden_microbatches=4,
        )
    )
    facts = live_facts(profile, tmp_path)  # the pipelined GPT sized to this card, as pp.run sizes it
    rows = run_torchrun(
        profile,
        "suite.stages.pp.worker",
        pp.worker_args(profile, facts=facts),
        raw_dir=tmp_path,
        tag="pp",
        nproc=2,
        timeout_s=300,
    ).rows()
    want = pp.expect(profile, facts)
    verdicts = {v.id: v for v in pp.judge(rows, want, facts)}
    assert all(verdicts[f"pp.golden.{s}.pp2"].status == "pass" for s in profile.section("pp").schedules), (
        verdicts
    )
    assert all(verdicts[f"pp.bubble.{s}"].status == "pass" for s in profile.section("pp").bubble_schedules), (
        verdicts
    )
    memory = [r for r in rows if r.metric == "activation_memory_bytes"]
    assert len(memory) == 2 * len(profile.section("pp").timed_schedules) and all(r.value > 0 for r in memory)
    bubble = [r for r in rows if r.case == "gpt" and r.metric == "bubble"]
    assert len(bubble) == 2 * len(profile.section("pp").timed_schedules) and all(
        0 <= r.value < 1 for r in bubble
    )
