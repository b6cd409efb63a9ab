"""Topology verdicts (suite/topology_rules.py) on real captures and on broken boxes derived from them."""

from __future__ import annotations

from pathlib import Path

import pytest

from suite.parsers.topo import parse
from suite.topology_rules import classify, expects_full_nvlink, judge_topology, link_class

DATA = Path(__file__).resolve().parent.parent / "data" / "topo"


def topo(stem: str, text: str | None = None):
    return parse(text if text is not None else (DATA / f"{stem}.txt").read_text(encoding="utf-8"))


def verdicts(t, names=None) -> dict:
    return {v.id: v for v in judge_topology(t, names)}


def break_link(stem: str, a: int, b: int, to: str) -> str:
    """The tab-separated capture with the GPU a–GPU b cell (both rows) replaced by `to`."""
    lines = (DATA / f"{stem}.txt").read_text(encoding="utf-8").split("\n")
    for row, col in ((a, b), (b, a)):
        i = next(k for k, line in enumerate(lines) if line.startswith(f"GPU{row}\t"))
        cells = lines[i].split("\t")
        cells[1 + col] = to
        lines[i] = "\t".join(cells)
    return "\n".join(lines)


SWITCHED = "29-a100-8gpu-nv12-10nic-4numa"  # 8× A100 SXM4 on NVSwitch: NV12 on all 28 pairs


# ---------------------------------------------------------------- switched boxes


def test_healthy_nvswitch_boxes_pass():
    for stem in (SWITCHED, "30-h100-8gpu-nv18-8nic-env-dump", "11-h100-4gpu-nv18-8nic-phb", "26-gb200-4gpu-nv18"):
        v = verdicts(topo(stem))["topology.links"]
        assert v.status == "pass", (stem, v)


def test_nvswitch_box_with_one_sys_pair_fails():
    t = topo(SWITCHED, break_link(SWITCHED, 3, 6, "SYS"))
    assert t.links["GPU3-GPU6"] == "SYS"
    v = verdicts(t)["topology.links"]
    assert v.status == "fail"
    assert "GPU3-GPU6 SYS without NVLink" in v.reason
    assert v.observed == "27×NV12 + 1×SYS"
    assert "nvidia-smi nvlink -s" in v.reason  # says what to do next


def test_nvswitch_box_with_a_gpu_cut_off_fails():
    t = topo(SWITCHED)
    for other in range(7):
        t.links[f"GPU{other}-GPU7"] = "SYS"
    # 21 pairs NV12, GPU7 on SYS to all seven: every other GPU still has 6 = n−2 NVLink peers.
    assert classify(t.gpus, t.links).kind == "switched"
    v = verdicts(t)["topology.links"]
    assert v.status == "fail" and "GPU0-GPU7 SYS" in v.reason


def test_differing_nvlink_count_on_a_switched_box_fails():
    t = topo(SWITCHED, break_link(SWITCHED, 0, 5, "NV6"))
    v = verdicts(t)["topology.links"]
    assert v.status == "fail"
    assert "GPU0-GPU5 NV6 with a different NVLink count" in v.reason


def test_four_gpu_slice_losing_one_gpu_fails():
    t = topo("25-h100-4gpu-nv6-4nic-numa-3175")
    for other in range(3):
        t.links[f"GPU{other}-GPU3"] = "SYS"
    v = verdicts(t)["topology.links"]
    assert v.status == "fail" and "GPU2-GPU3 SYS" in v.reason


# ---------------------------------------------------------------- point-to-point meshes: SYS by design


@pytest.mark.parametrize("stem", ["01-dgx1-v100-8gpu-mlx5", "27-dgx1-p100-8gpu-soc-nv1-mangled-header",
                                  "21-traverse-v100-4gpu-nv3-pairs-power9"])
def test_point_to_point_meshes_pass(stem):
    t = topo(stem)
    assert classify(t.gpus, t.links).kind == "nvlink-mesh"
    v = verdicts(t)["topology.links"]
    assert v.status == "pass" and "by design" in v.reason


def test_dgx1_p100_has_one_nvlink_count_everywhere_and_still_passes():
    # All 16 NVLink pairs read NV1: "same count on every NVLink pair" alone would call this a switched
    # box and fail its 12 SOC pairs. No GPU has more than 4 of 7 NVLink peers, so it is a mesh.
    t = topo("27-dgx1-p100-8gpu-soc-nv1-mangled-header")
    assert {l for l in t.links.values() if l.startswith("NV")} == {"NV1"}
    assert verdicts(t)["topology.links"].status == "pass"


def test_dgx1_v100_with_the_model_known_still_passes():
    t = topo("01-dgx1-v100-8gpu-mlx5")
    assert verdicts(t, ["Tesla V100-SXM2-16GB"] * 8)["topology.links"].status == "pass"


def test_nvlink_bridge_leaving_one_gpu_out_warns():
    v = verdicts(topo("28-rtx-a6000-3gpu-one-nvlink-bridge"))["topology.links"]
    assert v.status == "warn" and v.reason.startswith("GPU2 has no NVLink peer")


# ---------------------------------------------------------------- PCIe boxes


@pytest.mark.parametrize("stem,crossing", [
    ("14-rtx4090-8gpu-sys-2nic", 28),
    ("20-della-a100-2gpu-sys-cross-numa-2nic", 1),
    ("22-tf-gdr-4gpu-soc-legend-mlx4", 4),
    ("05-a100-pcie-2gpu-node-1nic", 0),
    ("31-l40s-2gpu-node-vllm-collect-env", 0),
])
def test_pcie_boxes_pass_with_cross_numa_pairs_noted(stem, crossing):
    v = verdicts(topo(stem))
    assert v["topology.links"].status == "pass"
    assert v["topology.numa"].status == "pass"
    if crossing:
        assert v["topology.numa"].observed.startswith(f"{crossing} of ")
        assert "keep tensor-parallel groups within one NUMA node" in v["topology.numa"].reason
    else:
        assert v["topology.numa"].observed == "no GPU pair crosses NUMA nodes"


def test_cross_numa_pairs_come_from_the_links_and_the_numa_columns():
    v = verdicts(topo("22-tf-gdr-4gpu-soc-legend-mlx4"))["topology.numa"]
    assert "GPU0-GPU2, GPU0-GPU3, GPU1-GPU2, GPU1-GPU3" in v.observed  # the SOC pairs
    assert "GPU0-GPU1" not in v.observed  # PHB under one socket
    assert "cpus 0-5: GPU0 GPU1; cpus 6-11: GPU2 GPU3" in v.reason  # grouped by CPU Affinity (no NUMA column)


def test_sxm_model_on_pcie_links_fails():
    t = topo("20-della-a100-2gpu-sys-cross-numa-2nic")
    assert verdicts(t, ["NVIDIA A100-PCIE-40GB"] * 2)["topology.links"].status == "pass"
    v = verdicts(t, ["NVIDIA A100-SXM4-80GB"] * 2)["topology.links"]
    assert v.status == "fail" and "GPU0-GPU1 SYS without NVLink" in v.reason


def test_single_gpu_skips():
    v = verdicts(topo("16-tesla-p4-1gpu"))
    assert v["topology.links"].status == "skip" and v["topology.numa"].status == "skip"


@pytest.mark.parametrize("name,full", [
    ("NVIDIA H100 80GB HBM3", True), ("NVIDIA H100 PCIe", False), ("NVIDIA H100 NVL", False),
    ("NVIDIA H200", True), ("NVIDIA H200 NVL", False), ("NVIDIA A100-SXM4-80GB", True),
    ("NVIDIA A100-PCIE-40GB", False), ("Tesla V100-SXM2-16GB", False), ("NVIDIA B200", True),
    ("NVIDIA GeForce RTX 4090", False), ("NVIDIA GB200", True), ("NVIDIA H800", True), (None, False),
])
def test_which_models_link_every_pair(name, full):
    assert expects_full_nvlink(name) is full


@pytest.mark.parametrize("stem,klass", [
    ("30-h100-8gpu-nv18-8nic-env-dump", "NV18"), ("29-a100-8gpu-nv12-10nic-4numa", "NV12"),
    ("01-dgx1-v100-8gpu-mlx5", "NVLink mesh"), ("14-rtx4090-8gpu-sys-2nic", "PCIe"), ("16-tesla-p4-1gpu", "single"),
])
def test_link_class_for_the_bandwidth_stage(stem, klass):
    t = topo(stem)
    assert link_class(t.links, t.gpus) == klass
