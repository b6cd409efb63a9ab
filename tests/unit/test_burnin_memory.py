"""burnin's HBM copy against the SKU's datasheet bandwidth (suite/hardware/gpus.py): a GPU far below fails
naming it, an unknown figure leaves the check open (never a pass), the rehearsal says nothing, no copy phase
no verdict."""

from __future__ import annotations

from suite.box_verdict import INCONCLUSIVE, box_verdict
from suite.hardware.gpus import gpu_for, memory_bandwidth
from suite.results import Row
from suite.stages.burnin import rules

H100 = gpu_for("NVIDIA H100 80GB HBM3")
GPU_RUN = {"profile": {"device": "cuda", "judge_performance": True}}


def copies(*per_gpu: float) -> list[Row]:
    return [
        Row(stage="burnin", case="hbm", metric="copy_GBps", unit="GB/s", value=v, rank=r, size_bytes=1 << 30)
        for r, v in enumerate(per_gpu)
    ]


def test_healthy_h100_copies_pass_with_their_share():
    verdict = rules.hbm_sku_verdict(copies(2900.0, 2870.0, 2950.0), H100, on_gpu=True)
    assert verdict.status == "pass" and verdict.id == "burnin.links.hbm.sku"
    assert "3350 GB/s" in verdict.expected and "86%–88% of the datasheet" in verdict.observed


def test_a_gpu_far_below_the_datasheet_fails_naming_it_even_when_its_peers_agree():
    """Every GPU equally slow passes the peer rule; only the SKU figure catches memory at reduced clocks."""
    rows = copies(2000.0, 2010.0, 1990.0, 2005.0)
    assert {v.status for v in rules.link_verdicts(rows, on_gpu=True)} == {"pass"}
    verdict = rules.hbm_sku_verdict(rows, H100, on_gpu=True)
    assert verdict.status == "fail"
    assert (
        verdict.observed.startswith("GPU 0 (rank 0, ?) 2000 GB/s (60%)")
        and "GPU 3 (rank 3" in verdict.observed
    )
    # 72 %: above the 70 % floor
    assert rules.hbm_sku_verdict(copies(2400.0), H100, on_gpu=True).status == "pass"


def test_unknown_bandwidth_is_open_never_a_pass():
    a100 = gpu_for("NVIDIA A100-SXM4-80GB")  # 40 and 80 GB parts under one entry: no figure without the size
    gh200 = gpu_for("NVIDIA GH200 480GB")  # 96 GB HBM3 or 144 GB HBM3e: its name's 480GB is the LPDDR5X
    for model, sheet in ((a100, None), (None, None), (gh200, memory_bandwidth(gh200, "NVIDIA GH200 480GB"))):
        verdict = rules.hbm_sku_verdict(copies(1800.0, 1810.0), model, on_gpu=True, datasheet=sheet)
        assert verdict.status == "skip" and "no memory bandwidth figure" in verdict.reason
        assert box_verdict(GPU_RUN, [verdict]).word == INCONCLUSIVE


def test_a100_a800_and_gh200_are_held_to_the_line_their_memory_size_picks():
    """One entry each, two memory sizes of different bandwidth: the card's reported memory (or the `40GB` of
    an A100's name) picks the datasheet line, so a healthy A100 40 GB is decided, not left open."""
    a100 = gpu_for("NVIDIA A100-PCIE-40GB")
    assert memory_bandwidth(a100, "NVIDIA A100-PCIE-40GB")[0] == 1555.0
    assert memory_bandwidth(a100, "NVIDIA A100 80GB PCIe")[0] == 1935.0
    assert (
        memory_bandwidth(gpu_for("NVIDIA A100-SXM4-80GB"), "NVIDIA A100-SXM4-80GB", 81920 << 20)[0] == 2039.0
    )
    assert (
        memory_bandwidth(gpu_for("NVIDIA A100-SXM4-40GB"), "NVIDIA A100-SXM4-40GB", 40960 << 20)[0] == 1555.0
    )
    gh200 = gpu_for("NVIDIA GH200 480GB")
    # 96 GB HBM3 as nvidia-smi says
    assert memory_bandwidth(gh200, "NVIDIA GH200 480GB", 97871 << 20)[0] == 4000.0
    assert memory_bandwidth(gh200, "NVIDIA GH200 144G HBM3e", 146831 << 20)[0] == 4900.0
    sheet = memory_bandwidth(a100, "NVIDIA A100-PCIE-40GB")
    healthy = rules.hbm_sku_verdict(copies(1300.0, 1310.0), a100, on_gpu=True, datasheet=sheet)
    assert (
        healthy.status == "pass" and "1555 GB/s" in healthy.expected and "40 GB of memory" in healthy.expected
    )
    slow = rules.hbm_sku_verdict(copies(1300.0, 700.0), a100, on_gpu=True, datasheet=sheet)
    assert slow.status == "fail" and "GPU 1" in slow.observed


def test_cpu_and_no_copy_phase():
    assert rules.hbm_sku_verdict(copies(5.0, 6.0), H100, on_gpu=False).status == "skip"
    assert rules.hbm_sku_verdict([], H100, on_gpu=True) is None
