"""The bandwidth and crossover workloads on NCCL (skipped without CUDA).

    .venv/bin/python -m pytest -q -m gpu tests/gpu/test_collectives_gpu.py

With one GPU the collectives run on a world of 1 (send/recv skipped); with more, on every GPU. The
nccl-tests stage face runs when a `*_perf` binary is on PATH or in $CARDTIME_NCCL_TESTS_DIR.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")]

SIZES = [8, 4096, 1 << 20, 1 << 26]


def profile():
    from suite.config import NCCL_GPU, SweepConfig

    n = torch.cuda.device_count()
    return NCCL_GPU.with_overrides(
        nproc=n,
        degrees=tuple(d for d in (1, 2, 4, 8) if d <= n),
        sweep=SweepConfig(min_bytes=8, max_bytes=1 << 26, factor=64, warmup_iters=2, iters=5),
    )


def test_torch_sweep_on_nccl_is_right_and_timed(tmp_path):
    from suite.launch.torchrun import run_torchrun

    p = profile()
    result = run_torchrun(
        p,
        "suite.workloads.collective_sweep",
        ["--sizes", ",".join(map(str, SIZES)), "--warmup", "2", "--iters", "5"],
        raw_dir=tmp_path,
        tag="gpu",
        timeout_s=600,
    )
    rows = result.rows()
    wrong = [r for r in rows if r.metric == "wrong"]
    assert wrong and all(r.value == 0 for r in wrong), [
        (r.case, r.size_bytes, r.value) for r in wrong if r.value
    ]
    big = [r for r in rows if r.case == "all_reduce" and r.metric == "busbw" and r.size_bytes == 1 << 26]
    assert big and (p.nproc == 1 or big[0].value > 1.0)  # GB/s: any NVLink or PCIe link does far better


def test_hand_ring_and_tree_on_nccl(tmp_path):
    from suite.launch.torchrun import run_torchrun

    p = profile()
    result = run_torchrun(
        p,
        "suite.stages.crossover.hand_allreduce",
        ["--sizes", ",".join(map(str, SIZES)), "--warmup", "1", "--iters", "3"],
        raw_dir=tmp_path,
        tag="hand",
        timeout_s=600,
    )
    wrong = [r for r in result.rows() if r.metric == "wrong"]
    assert len(wrong) == 2 * len(SIZES) and all(r.value == 0 for r in wrong)


def test_bandwidth_stage_on_this_box(tmp_path):
    from suite.stages import bandwidth
    from tests.gpu.card_facts import live_facts, stage_context

    p = profile()
    # topology's card and P2P pairs: nccl-tests' -e and the floors as in a run
    facts = live_facts(p, tmp_path)
    ctx = stage_context(p, "bandwidth", tmp_path, facts)
    rows = bandwidth.run(p, ctx)
    statuses = {r.case: r.text for r in rows if r.metric == "status"}
    assert set(statuses) == {f"nccl-tests.{c}" for c in bandwidth.COLLECTIVES}
    assert "alpha_beta" in ctx.published
    verdicts = bandwidth.judge(rows, bandwidth.expect(p, facts), {**facts, **ctx.published})
    assert not [v for v in verdicts if v.id.startswith("bandwidth.wrong") and v.status != "pass"]
    # the primitive probe ran first in the same launch: NCCL supports every primitive (point-to-point needs 2
    # ranks)
    probe = {
        v.id.removeprefix("bandwidth.probe."): v.status
        for v in verdicts
        if v.id.startswith("bandwidth.probe.")
    }
    assert len(probe) == 10
    p2p = {"send_recv", "isend_irecv", "batch_isend_irecv"}
    assert {s for k, s in probe.items() if k not in p2p} == {"pass"}, probe
    assert {probe[k] for k in p2p} == ({"skip"} if p.nproc == 1 else {"pass"}), probe
