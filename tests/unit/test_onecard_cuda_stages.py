"""The CUDA-only stages' pure parts, without a GPU: nccl1gpu's matcher on NCCL's real refusal texts and its
verdicts on rows shaped as its worker writes them; pinned's link expectation and verdicts; both figures."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from matplotlib.figure import Figure

from suite.config import NCCL_1GPU
from suite.results import Row
from suite.stages import nccl1gpu, pinned
from suite.stages.nccl1gpu import figure as nccl_figure
from suite.stages.pinned import figure as pinned_figure
from tests.factories import by_id

CAPTURES = Path(__file__).resolve().parents[1] / "data" / "nccl" / "duplicate_gpu"
FACTS = {"profile": NCCL_1GPU.to_dict()}


@pytest.mark.parametrize(
    "name, ranks, bus",
    [("torch-2.x-nccl-2.19.3.txt", (3, 0), "f000"), ("torch-2.x-nccl-2.20.5.txt", (1, 0), "10")],
)
def test_the_matcher_reads_torchs_error_text(name, ranks, bus):
    assert nccl1gpu.match_duplicate((CAPTURES / name).read_text()) == {"ranks": ranks, "bus_id": bus}


def test_the_matcher_reads_nccl_warn_lines_and_nothing_else():
    lines = (CAPTURES / "nccl-warn-lines.txt").read_text().splitlines()
    assert [nccl1gpu.match_duplicate(line) for line in lines] == [
        {"ranks": (15, 7), "bus_id": "e4000"},
        {"ranks": (2, 0), "bus_id": "1000"},
    ]
    assert nccl1gpu.match_duplicate("RuntimeError: Timed out waiting 10000ms for recv") is None
    assert nccl1gpu.match_duplicate(None) is None


def dup_rows(texts, refused=1.0):
    return [
        Row(stage="nccl1gpu", case="duplicate", metric="refused", value=refused, unit="count", text=t, rank=r)
        for r, t in enumerate(texts)
    ] + [
        Row(stage="nccl1gpu", case="versions", metric="nccl", value=float("nan"), unit="count", text="2.29.3")
    ]


def test_the_refusal_with_ncclS_text_is_an_explained_pass():
    text = "DistBackendError: " + (CAPTURES / "torch-2.x-nccl-2.20.5.txt").read_text()
    [v] = nccl1gpu.duplicate_verdicts(dup_rows([text, text]))
    assert v.status == "pass" and "rank 1 and rank 0 both on CUDA device 10" in v.observed
    assert "NVIDIA/nccl#418" in v.reason


def test_an_accepting_nccl_warns_and_another_error_fails():
    [accepted] = nccl1gpu.duplicate_verdicts(
        dup_rows(["accepted: all_reduce of ones gave 2"] * 2, refused=0.0)
    )
    assert accepted.status == "warn" and "2.29.3" in accepted.observed
    [other] = nccl1gpu.duplicate_verdicts(
        dup_rows(["DistBackendError: NCCL error: unhandled system error"] * 2)
    )
    assert other.status == "fail" and "unhandled system error" in other.observed
    assert nccl1gpu.duplicate_verdicts([])[0].status == "fail"


def one_rank_rows(wait_s=5e-5, completed_after_wait=0.0, value_ok=1.0):
    values = {
        ("init", "identity_ok"): 1.0,
        ("init", "first_collective_s"): 1.8,
        ("new_group", "result_ok"): 1.0,
        ("async", "enqueue_s"): 3e-5,
        ("async", "wait_host_s"): wait_s,
        ("async", "sync_host_s"): 0.09,
        ("async", "gemm_device_s"): 0.092,
        ("async", "completed_after_wait"): completed_after_wait,
        ("async", "completed_after_sync"): 1.0,
        ("async", "value_ok"): value_ok,
    }
    return [Row(stage="nccl1gpu", case=c, metric=m, value=v, unit="s") for (c, m), v in values.items()]


def test_wait_that_blocks_the_host_or_a_wrong_result_fails():
    good = by_id(nccl1gpu.one_rank_verdicts(one_rank_rows()))
    assert len(good) == 3 and {v.status for v in good.values()} == {"pass"}
    blocking = by_id(nccl1gpu.one_rank_verdicts(one_rank_rows(wait_s=0.09, completed_after_wait=1.0)))
    assert blocking["nccl1gpu.async.wait_vs_synchronize"].status == "fail"
    assert "BLOCKING_WAIT" in blocking["nccl1gpu.async.wait_vs_synchronize"].reason
    wrong = by_id(nccl1gpu.one_rank_verdicts(one_rank_rows(value_ok=0.0)))
    assert "stream ordering" in wrong["nccl1gpu.async.wait_vs_synchronize"].reason


def test_gloo_on_cuda_tensors_equal_cpu_passes_differing_fails_refused_skips():
    def rows(name, diffs, supported=1.0, text=None):
        out = [
            Row(
                stage="nccl1gpu",
                case=name,
                metric="supported",
                value=supported,
                unit="count",
                rank=r,
                source="gloo",
                text=text,
            )
            for r in range(len(diffs))
        ]
        return out + [
            Row(
                stage="nccl1gpu",
                case=name,
                metric="max_abs_diff_vs_cpu",
                value=d,
                unit="abs",
                rank=r,
                source="gloo",
            )
            for r, d in enumerate(diffs)
            if supported
        ]

    verdicts = by_id(
        nccl1gpu.gloo_cuda_verdicts(
            rows("all_reduce_sum", [0.0, 0.0])
            + rows("broadcast", [0.0, 1.0])
            + rows(
                "all_to_all_single",
                [0.0, 0.0],
                supported=0.0,
                text="RuntimeError: ProcessGroupGloo::alltoall: unsupported device type cuda",
            )
        )
    )
    assert [
        verdicts[f"nccl1gpu.gloo_cuda.{n}"].status
        for n in ("all_reduce_sum", "broadcast", "all_to_all_single")
    ] == ["pass", "fail", "skip"]
    assert nccl1gpu.gloo_cuda_verdicts([])[0].status == "fail"


def test_the_nccl1gpu_figure():
    frame = pd.DataFrame(
        [r.to_dict() for r in one_rank_rows()]
        + [
            Row(
                stage="nccl1gpu",
                case="broadcast",
                metric="max_abs_diff_vs_cpu",
                value=0.0,
                unit="abs",
                rank=0,
                source="gloo",
            ).to_dict()
        ]
    )
    [fig] = nccl_figure.figures(frame, pd.DataFrame(), FACTS)
    assert isinstance(fig, Figure) and len(fig.axes[0].patches) == 4


PCIE5 = {"topology": {"pcie": {"gen_max": 5, "width_max": 16, "per_gpu": {"GPU0": {"gen": 5, "width": 16}}}}}


def pinned_rows(h2d=52.0, d2h=50.0, pageable=21.0, overlap=0.93):
    rows = [
        Row(
            stage="pinned",
            case="bandwidth",
            metric="GBps",
            value=v,
            unit="GB/s",
            placement=d,
            source=m,
            size_bytes=2**28,
        )
        for d, m, v in (
            ("h2d", "pinned", h2d),
            ("d2h", "pinned", d2h),
            ("h2d", "pageable", pageable),
            ("d2h", "pageable", pageable),
        )
    ]
    rows += [
        Row(stage="pinned", case="overlap", metric=m, value=v, unit="s", source="pinned", count=40)
        for m, v in (
            ("t_gemm", 0.0052),
            ("t_copy", 0.0051),
            ("t_both", 0.0055),
            ("overlap_fraction", overlap),
        )
    ]
    rows += [
        Row(
            stage="pinned",
            case="overlap",
            metric="overlap_fraction",
            value=0.02,
            unit="ratio",
            source="pageable",
        )
    ]
    rows += [
        Row(stage="pinned", case="timeline", metric=f"{e}_s", value=v, unit="s", source="pinned", algo=lane)
        for lane, e, v in (
            ("gemm", "start", 0.0),
            ("gemm", "end", 0.0052),
            ("copy", "start", 0.0),
            ("copy", "end", 0.0051),
        )
    ]
    return rows


def test_the_link_comes_from_nvidia_smi_then_the_gpu_table():
    assert pinned.link_GBps(PCIE5) == (63.0, "PCIe Gen5 x16 (nvidia-smi -q)")
    # one card: no matrix, box-wide figures only
    narrow = {"topology": {"pcie": {"gen_max": 4, "width_max": 8}}}
    assert pinned.link_GBps(narrow)[0] == pytest.approx(15.75)
    rate, basis = pinned.link_GBps({"topology": {"gpus": ["NVIDIA H100 80GB HBM3"]}})
    assert rate == 63.0 and "suite/hardware/gpus.py" in basis
    assert pinned.link_GBps({}) == (None, "no PCIe facts")
    [h2d, d2h] = pinned.expect(NCCL_1GPU, PCIE5)
    assert h2d.value == pytest.approx(0.7 * 63.0) and (h2d.placement, d2h.placement) == ("h2d", "d2h")


def test_pinned_verdicts_pass_warn_and_skip():
    good = by_id(pinned.judge(pinned_rows(), [], PCIE5))
    assert len(good) == 5 and {v.status for v in good.values()} == {"pass"}
    slow = by_id(pinned.judge(pinned_rows(h2d=20.0, pageable=22.0, overlap=0.1), [], PCIE5))
    assert [
        slow[k].status
        for k in (
            "pinned.bandwidth.h2d",
            "pinned.pinned_beats_pageable.h2d",
            "pinned.overlap.pinned",
            "pinned.bandwidth.d2h",
        )
    ] == ["warn", "warn", "warn", "pass"]
    unknown = by_id(pinned.judge(pinned_rows(), [], {}))
    assert unknown["pinned.bandwidth.h2d"].status == "skip"
    assert {v.status for v in pinned.judge([], [], PCIE5)} == {"fail"}


def test_the_pinned_figure_draws_rates_and_the_timeline():
    frame = pd.DataFrame([r.to_dict() for r in pinned_rows()])
    exp = pd.DataFrame([e.to_dict() for e in pinned.expect(NCCL_1GPU, PCIE5)])
    [fig] = pinned_figure.figures(frame, exp, PCIE5)
    assert len(fig.axes[0].patches) == 4 and len(fig.axes[1].patches) == 2
