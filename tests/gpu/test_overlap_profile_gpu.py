"""The overlap and profile stages on NCCL with every visible GPU (skipped without CUDA).

    .venv/bin/python -m pytest -q -m gpu tests/gpu/test_overlap_profile_gpu.py

A mid-sized model (bf16 timing, float32 gradient check) keeps each launch short. The profile stage
captures with Nsight Systems when `nsys` is on PATH (per-rank reports exported to SQLite), else
with torch.profiler (CUDA activity); either way NCCL kernels must show on every rank once there
are two GPUs or more.
"""

from __future__ import annotations

import shutil

import pytest

torch = pytest.importorskip("torch")

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")]


def gpu_profile():
    from suite.config import NCCL_GPU, GptConfig

    n = torch.cuda.device_count()
    model = GptConfig(
        vocab=4096,
        hidden=512,
        layers=4,
        heads=8,
        seq_len=256,
        batch=8,
        dtype="bfloat16",
        steps=5,
        warmup_steps=2,
    )
    return NCCL_GPU.with_overrides(nproc=n, degrees=tuple(d for d in (1, 2, 4, 8) if d <= n), model=model)


def context(profile, stage, tmp_path):
    """The stage's context holding the facts topology publishes on this box: the model sized to the card."""
    from tests.gpu.card_facts import live_facts, stage_context

    return stage_context(profile, stage, tmp_path, live_facts(profile, tmp_path))


def test_overlap_stage_on_nccl(tmp_path):
    from suite.stages import overlap

    p = gpu_profile()
    ctx = context(p, "overlap", tmp_path)
    expectations = overlap.expect(p, ctx.facts)
    rows = overlap.run(p, ctx)
    verdicts = {v.id: v for v in overlap.judge(rows, expectations, {**ctx.facts, **ctx.published})}
    grads = {k: v for k, v in verdicts.items() if k.startswith("overlap.grads.")}
    assert len(grads) == 4 and {v.status for v in grads.values()} == {"pass"}, [
        v.observed for v in grads.values()
    ]
    speed = [v for k, v in verdicts.items() if k.startswith("overlap.speed.")]
    assert len(speed) == 3 and {v.status for v in speed} <= {"pass", "warn"}
    expected = {e.overlap: e.value for e in expectations if e.metric == "buckets"}
    for r in rows:
        if r.metric == "buckets":
            assert r.value == expected[r.overlap], (r.overlap, r.text)
    # the buckets watched on CUDA events: DDP's own, each launched after its last gradient; hidden or not
    for check, allowed in (("membership", {"pass"}), ("launch", {"pass"}), ("hidden", {"pass", "warn"})):
        got = {v.id: v.status for k, v in verdicts.items() if k.startswith(f"overlap.{check}.")}
        assert len(got) == 3 and set(got.values()) <= allowed, (check, [verdicts[k].observed for k in got])


def test_profile_stage_on_nccl(tmp_path):
    from suite.stages import profile

    p = gpu_profile()
    ctx = context(p, "profile", tmp_path)
    rows = profile.run(p, ctx)
    facts = {**ctx.facts, **ctx.published}
    verdicts = {v.id: v for v in profile.judge(rows, profile.expect(p, ctx.facts), facts)}
    assert ctx.published["trace_capture"]["tool"] == ("nsys" if shutil.which("nsys") else "torch.profiler")
    if shutil.which("nsys"):
        assert sorted(f.name for f in ctx.raw_dir.glob("rank_*.sqlite")) == [
            f"rank_{r}.sqlite" for r in range(p.nproc)
        ]
    compute = {r.rank: r.value for r in rows if r.metric == "compute_us"}
    assert sorted(compute) == list(range(p.nproc)) and all(v > 0 for v in compute.values())
    if p.nproc >= 2:
        assert verdicts["profile.traces"].status == "pass", verdicts["profile.traces"].reason
        assert all(
            v.status in ("pass", "warn") for k, v in verdicts.items() if k.startswith("profile.overlap.")
        )
