"""Each stage's first-screen headline, measured against expected, on real rows: a full rehearsal's records
(tests/data/report/rehearsal-20261201, see its README) and, for the CUDA-only stages, rows shaped as their
workers write them (tests/unit/test_onecard_cuda_stages.py's)."""

from __future__ import annotations

from pathlib import Path

import pytest

from reports import headline
from reports.runview import load_run
from suite.config import NCCL_1GPU
from suite.results import Row
from suite.stages import nccl1gpu, pinned
from tests.unit.test_onecard_cuda_stages import CAPTURES, PCIE5, dup_rows, one_rank_rows, pinned_rows

REHEARSAL = Path(__file__).resolve().parents[1] / "data" / "report" / "rehearsal-20261201"

EXPECTED = {
    "health": "float32 GEMM 0.06766 TFLOP/s median of 4, slowest at 97% of its peers' · expected ≥ 50% · "
    "copies h2d 11.15 / d2h 7.111 GB/s",
    "pp": "sleep stages 1f1b P=2 M=4: bubble 0.209 vs formula 0.200 · 5 of 5 schedules equal one process",
    "cp": "CP=2,4: 4 of 4 equal full attention (worst 0.25× tolerance) · bytes sent = formula 4 of 4",
    "ep": "0 token mismatches over 485 assignments, worst error 0.37× tolerance · max/mean load 1.22 "
    "uniform, "
    "1.62 skewed",
    "memory": "state 1.76 MiB vs formula 1.76 MiB (+0.0%) · activations/block 438 KiB vs formula 438 KiB "
    "(+0.0%) · "
    "largest batch 7, predicted 7",
    "precision": "final loss fp32 1.791, bf16 1.784 (0.3% off), fp16+GradScaler 1.903 (4.7% off) · "
    "expected ≤ 10% of fp32's decrease · fp16 unscaled stalls",
}


@pytest.fixture(scope="module")
def rehearsal():
    return load_run(REHEARSAL)


@pytest.mark.parametrize("stage", sorted(EXPECTED))
def test_headline_on_the_rehearsals_rows(rehearsal, stage):
    rows, verdicts = rehearsal.stage_rows(stage), rehearsal.stage_verdicts(stage)
    assert len(rows) and len(verdicts)
    text = headline.declared_headline(stage, rows, verdicts, rehearsal.stage_expectations(stage))
    assert text == EXPECTED[stage]
    assert len(text) <= headline.MAX_HEADLINE  # shown whole on the first screen, never clipped


def test_the_first_screen_shows_no_generic_line_for_a_stage_with_rows(rehearsal):
    generic = {
        s
        for s in rehearsal.stages()
        if len(rehearsal.stage_rows(s))
        and headline.declared_headline(
            s, rehearsal.stage_rows(s), rehearsal.stage_verdicts(s), rehearsal.stage_expectations(s)
        )
        is None
    }
    assert generic == {"crossover"}  # its headline needs the Ring/Tree timings a CPU run does not judge


def test_headlines_without_their_rows_fall_back_to_the_generic_line():
    for stage in ("health", "pp", "cp", "ep", "memory", "precision", "pinned", "nccl1gpu"):
        module = __import__(f"suite.stages.{stage}", fromlist=["headline"])
        assert module.headline([], [], []) is None


def test_pinned_headline_on_its_workers_rows():
    rows = pinned_rows(overlap=0.93)
    text = pinned.headline(rows, pinned.judge(rows, [], PCIE5), pinned.expect(NCCL_1GPU, PCIE5))
    assert (
        text == "pinned h2d 52 / d2h 50 GB/s (pageable 21) · expected ≥ 44.1 · copy 93% hidden under the GEMM"
    )
    slow = pinned.headline(pinned_rows(h2d=20.0), [], [])
    assert slow == "pinned h2d 20 / d2h 50 GB/s (pageable 21) · copy 93% hidden under the GEMM"


def test_nccl1gpu_headline_on_its_workers_rows():
    refusal = "DistBackendError: " + (CAPTURES / "torch-2.x-nccl-2.20.5.txt").read_text()
    gloo = [
        Row(stage="nccl1gpu", case=case, metric=metric, value=value, unit="abs", rank=rank, source="gloo")
        for case, diff in (("all_reduce_sum", 0.0), ("broadcast", 1.0))
        for rank in (0, 1)
        for metric, value in (("supported", 1.0), ("max_abs_diff_vs_cpu", diff))
    ]
    rows = one_rank_rows() + dup_rows([refusal, refusal]) + gloo
    verdicts = (
        nccl1gpu.one_rank_verdicts(rows)
        + nccl1gpu.duplicate_verdicts(rows)
        + nccl1gpu.gloo_cuda_verdicts(gloo)
    )
    assert nccl1gpu.headline(rows, verdicts, []) == (
        "wait() 50 µs vs synchronize() 90 ms (GEMM chain 92 ms) · "
        "two ranks on one GPU refused · gloo on CUDA = CPU 1 of 2"
    )
    assert (
        nccl1gpu.headline(one_rank_rows(), [], []) == "wait() 50 µs vs synchronize() 90 ms (GEMM chain 92 ms)"
    )
