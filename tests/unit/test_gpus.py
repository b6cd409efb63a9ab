"""The one GPU table (suite/hardware/gpus.py): one matching rule, no entry shadowing a later one, sourced
figures."""

from __future__ import annotations

import pytest

from suite.hardware.gpus import GPUS, gpu_for, words


def test_the_table_is_not_empty_and_models_are_unique():
    assert len(GPUS) >= 20
    assert len({g.model for g in GPUS}) == len(GPUS)


def test_no_entry_can_shadow_a_later_one():
    # First match wins, and an entry matches when all its markers are words of the name: an earlier entry
    # whose markers are a subset of a later one's would match every name the later one does.
    assert len(GPUS) >= 2
    shadowed = [
        (early.model, late.model)
        for i, early in enumerate(GPUS)
        for late in GPUS[i + 1 :]
        if set(early.markers) <= set(late.markers)
    ]
    assert shadowed == []


@pytest.mark.parametrize("gpu", GPUS, ids=lambda g: g.model)
def test_every_example_name_finds_its_own_entry(gpu):
    assert gpu.examples, gpu.model
    for name in gpu.examples:
        assert gpu_for(name) is gpu, name


@pytest.mark.parametrize(
    "name,model",
    [
        ("NVIDIA H100 NVL", "H100 NVL"),
        ("NVIDIA H100 PCIe", "H100 PCIe"),
        ("NVIDIA H200 NVL", "H200 NVL"),
        ("NVIDIA A100-PCIE-40GB", "A100 PCIe"),
        ("NVIDIA A100 80GB PCIe", "A100 PCIe"),
        ("Tesla V100-PCIE-16GB", "V100 PCIe"),
    ],
)
def test_pcie_and_nvl_cards_are_not_matched_as_sxm(name, model):
    gpu = gpu_for(name)
    assert gpu.model == model
    assert not gpu.switch_boards_only  # an NVL/PCIe box is not held to the NVSwitch rule


def test_words_keep_short_markers_out_of_longer_names():
    assert words("NVIDIA A100-SXM4-80GB") == {"NVIDIA", "A100", "SXM4", "80GB"}
    assert gpu_for("NVIDIA GB200").model == "GB200"  # "B200" is a substring of GB200 but not a word of it
    assert gpu_for("NVIDIA A100-SXM4-80GB").model == "A100 SXM"  # not A10
    assert gpu_for("NVIDIA L40S").model == "L40S" and gpu_for("NVIDIA L4").model == "L4"
    a10g = gpu_for("NVIDIA A10G")  # a different part (AWS): its own entry, no figure rather than A10's
    assert a10g.model == "A10G" and a10g.bf16_dense_tflops is None and a10g.pcie_gen == 4


def test_the_gpus_renters_get_have_an_entry_with_its_source():
    """A10G, L4, H20, GH200, RTX 5090, RTX 6000 Ada: each named, with a figure and its datasheet, or none and
    why."""
    for name, peak in (
        ("NVIDIA A10G", None),
        ("NVIDIA L4", 121.0),
        ("NVIDIA H20", None),
        ("NVIDIA GH200 480GB", 989.5),
        ("NVIDIA GeForce RTX 5090", None),
        ("NVIDIA RTX 6000 Ada Generation", 364.2),
    ):
        entry = gpu_for(name)
        assert entry is not None and entry.bf16_dense_tflops == peak, name
        assert entry.peak_source and (peak is None) == ("no " in entry.peak_source.split(":")[0]), (
            entry.peak_source
        )
    assert gpu_for("Quadro RTX 6000") is None  # Turing, not the Ada card
    assert gpu_for("Mystery Accelerator") is None and gpu_for(None) is None and gpu_for("cpu") is None


def test_gb200_gets_its_own_dense_peak_not_b200s():
    gb200, b200 = gpu_for("NVIDIA GB200"), gpu_for("NVIDIA B200")
    assert (
        gb200.bf16_dense_tflops == 2500.0
        and "1,200 W" in gb200.peak_source
        and "5 PFLOPS" in gb200.peak_source
    )
    assert b200.bf16_dense_tflops == 2250.0
    assert gb200.bf16_dense_flops == 2.5e15


@pytest.mark.parametrize(
    "name,tflops",
    [
        ("NVIDIA H100 80GB HBM3", 989.4),
        ("NVIDIA H100 NVL", 835.5),
        ("NVIDIA H100 PCIe", 756.5),
        ("NVIDIA H200", 989.4),
        ("NVIDIA H200 NVL", 835.5),
        ("NVIDIA A100-SXM4-80GB", 312.0),
        ("NVIDIA L40S", 362.05),
        ("NVIDIA L4", 121.0),
        ("NVIDIA GeForce RTX 4090", 165.2),
        ("Tesla V100-SXM2-32GB", None),
    ],
)
def test_dense_peaks_and_their_sources(name, tflops):
    gpu = gpu_for(name)
    assert gpu.bf16_dense_tflops == tflops
    if tflops is not None:
        assert "datasheet" in gpu.peak_source or "whitepaper" in gpu.peak_source
        assert f"{tflops:,g}" in gpu.peak_source  # the dense figure the source's number halves to


def test_link_figures_from_the_checklist():
    assert gpu_for("NVIDIA H200").nvlink_full_GBps == 450.0
    assert gpu_for("NVIDIA A100-SXM4-80GB").nvlink_full_GBps == 300.0
    assert gpu_for("NVIDIA B200").nvlink_full_GBps == 900.0
    assert gpu_for("NVIDIA GeForce RTX 4090").nvlink_full_GBps is None
    assert gpu_for("NVIDIA GeForce RTX 4090").pcie_x16_GBps == 31.5
    assert gpu_for("NVIDIA H100 80GB HBM3").pcie_x16_GBps == 63.0


def test_memory_bandwidth_figures_are_sourced_and_only_where_one_figure_holds():
    from suite.hardware.gpus import MEMORY_GBps

    assert set(MEMORY_GBps) <= {g.model for g in GPUS}  # no figure for a model the table does not hold
    assert gpu_for("NVIDIA H100 80GB HBM3").memory_GBps == 3350.0
    assert gpu_for("NVIDIA H200").memory_GBps == 4800.0 and gpu_for("NVIDIA H100 PCIe").memory_GBps == 2000.0
    for g in GPUS:
        if g.memory_GBps:
            assert "datasheet" in g.memory_source or "whitepaper" in g.memory_source, g.model
    # one name, two memory sizes of different bandwidth: no figure, never the lower one as a guess
    assert (
        gpu_for("NVIDIA A100-SXM4-80GB").memory_GBps is None
        and gpu_for("NVIDIA GH200 480GB").memory_GBps is None
    )
