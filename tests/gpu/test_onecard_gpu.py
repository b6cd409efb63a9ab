"""The one-card stages' CUDA faces (skipped without CUDA); the device check runs them as the nccl-1gpu run
too.

    .venv/bin/python -m pytest -q -m gpu tests/gpu/test_onecard_gpu.py

Small sizes: the allocator's numbers against the memory formula, fp16/bf16 numerics on the card, pinned
copies and the side-stream overlap. The batch search is left to the nccl-1gpu run: the memory fraction it
sets would stay on this test process.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")]

DEVICE = torch.device("cuda", 0) if torch.cuda.is_available() else None


def test_the_allocator_agrees_with_the_memory_formula():
    from suite.costmodel.memory_formula import activation_bytes_per_layer, state_bytes
    from suite.costmodel.sizing import parameter_count
    from suite.stages.memory import MemoryConfig
    from suite.stages.memory.worker import Phases, activation_rows

    mc = MemoryConfig(vocab=4096, hidden=512, heads=8, seq_len=512, batch=2, search_layers=2)
    state = Phases(DEVICE).state(mc.model(layers=2))
    for part, value in state_bytes(parameter_count(mc.model(layers=2))).items():
        assert state[part] == pytest.approx(value, rel=0.01), part
    per_layer = {r.case: r.value for r in activation_rows(mc, DEVICE)}
    s, b, h, a = mc.seq_len, mc.batch, mc.hidden, mc.heads
    assert per_layer["activations"] == pytest.approx(activation_bytes_per_layer(s, b, h, a), rel=0.05)
    assert per_layer["activations.checkpoint"] == pytest.approx(
        activation_bytes_per_layer(s, b, h, a, True), rel=0.05
    )


def test_precision_on_the_card_passes_its_checks():
    from suite.config import NCCL_1GPU
    from suite.stages import precision
    from suite.stages.precision.worker import precision_rows

    pc = NCCL_1GPU.section("precision")
    rows = precision_rows(pc.model(), DEVICE, pc)
    verdicts = precision.judge(rows, [], {"profile": NCCL_1GPU.to_dict()})
    assert len(verdicts) == 9
    assert [v.id for v in verdicts if v.status != "pass"] == []


def test_pinned_copies_beat_pageable_and_overlap_a_gemm():
    from suite.stages.pinned import PinnedConfig
    from suite.stages.pinned.worker import pinned_rows

    rows = pinned_rows(DEVICE, PinnedConfig(copy_bytes=64 * 2**20, iters=5))
    rate = {(r.placement, r.source): r.value for r in rows if r.case == "bandwidth"}
    assert len(rate) == 4 and rate[("h2d", "pinned")] > rate[("h2d", "pageable")]
    overlap = {r.source: r.value for r in rows if r.metric == "overlap_fraction"}
    assert overlap["pinned"] > 0.5 > overlap["pageable"]
