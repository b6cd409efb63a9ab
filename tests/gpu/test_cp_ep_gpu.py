"""The cp and ep drills on NCCL (skipped without CUDA).

    .venv/bin/python -m pytest -q -m gpu tests/gpu/test_cp_ep_gpu.py

ep runs on every GPU there is (EP = 1 on one card: every expert local, the all-to-alls a copy); cp needs
two cards or more (NCCL refuses two ranks on one GPU), and there also checks torch's context_parallel().
Sizes are the nccl-gpu profile's golden ones with shortened timings, then sized to the card the way the stages
size them (tests/gpu/card_facts.py: the facts topology publishes on this box).
"""

from __future__ import annotations

import dataclasses
import json

import pytest

torch = pytest.importorskip("torch")

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")]


def gpus() -> int:
    """The ranks ep and cp run on: the largest power of two within the GPUs (suite/power_of_two.py)."""
    from suite.power_of_two import parallel_ranks

    return parallel_ranks(torch.cuda.device_count())


def test_ep_on_nccl_matches_one_process_and_is_timed(tmp_path):
    from suite.config import NCCL_GPU
    from suite.launch.torchrun import run_torchrun
    from suite.stages import ep as ep_stage
    from tests.gpu.card_facts import live_facts

    n = gpus()
    cfg = dataclasses.replace(
        NCCL_GPU.section("ep"), experts=2 * n, tokens=1024, hidden=1024, ffn=2048, reps=2
    )
    profile = NCCL_GPU.with_overrides(nproc=n, degrees=(1,), ep=cfg)
    facts = live_facts(profile, tmp_path)
    cfg = dataclasses.replace(cfg, tokens=ep_stage.timed_tokens(profile, facts)[0])  # as ep.run sizes them
    rows = run_torchrun(
        profile,
        "suite.stages.ep.worker",
        ["--ep", json.dumps(dataclasses.asdict(cfg))],
        raw_dir=tmp_path,
        tag="gpu",
        nproc=n,
        timeout_s=600,
    ).rows()
    verdicts = {v.id: v for v in ep_stage.judge(rows, [], facts)}
    for router in ep_stage.ROUTERS:
        assert verdicts[f"ep.golden.{router}"].status == "pass", verdicts[f"ep.golden.{router}"]
    steps = [r for r in rows if r.case.startswith("step.") and r.metric == "time_s"]
    assert len(steps) == 2 * len(cfg.capacity_factors) and all(r.value > 0 for r in steps)


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="context parallelism needs two GPUs or more")
def test_cp_on_nccl_matches_full_attention_and_torch_cp_does_too(tmp_path):
    from suite.config import NCCL_GPU
    from suite.launch.torchrun import run_torchrun
    from suite.stages import cp as cp_stage
    from tests.gpu.card_facts import live_facts

    n = gpus()
    ds = tuple(d for d in (2, 4, 8) if d <= n)  # n is a power of two: each divides it
    cfg = dataclasses.replace(NCCL_GPU.section("cp"), degrees=ds, seq_lens=(2048, 4096), reps=2)
    profile = NCCL_GPU.with_overrides(nproc=n, degrees=(1,), cp=cfg)
    facts = live_facts(profile, tmp_path)
    cfg = dataclasses.replace(cfg, seq_lens=cp_stage.timed_lengths(profile, facts)[0])  # as cp.run sizes them
    rows = run_torchrun(
        profile,
        "suite.stages.cp.worker",
        ["--cp", json.dumps(dataclasses.asdict(cfg)), "--degrees", ",".join(map(str, ds))],
        raw_dir=tmp_path,
        tag="gpu",
        nproc=n,
        timeout_s=600,
    ).rows()
    verdicts = {v.id: v for v in cp_stage.judge(rows, [], facts)}
    for d in ds:
        for algo in (*cp_stage.ALGOS, "torch_cp"):
            assert verdicts[f"cp.golden.{algo}.cp{d}"].status == "pass", verdicts[f"cp.golden.{algo}.cp{d}"]
        assert verdicts[f"cp.comm_volume.ring.cp{d}"].status == "pass"
    assert {r.world for r in rows if r.metric == "rotation_hidden"} == set(ds)
