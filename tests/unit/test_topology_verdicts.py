"""Topology verdicts (suite/stages/topology/rules.py) on real captures and on broken boxes derived from
them."""

from __future__ import annotations

from pathlib import Path

import pytest

from suite.parsers.topo import parse
from suite.stages.topology.rules import classify, expects_full_nvlink, link_class, verdicts_for_parse

DATA = Path(__file__).resolve().parent.parent / "data" / "topo"


def topo(stem: str, text: str | None = None):
    return parse(text if text is not None else (DATA / f"{stem}.txt").read_text(encoding="utf-8"))


def verdicts(t, names=None) -> dict:
    return {v.id: v for v in verdicts_for_parse(t.to_dict(), names)}


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
A100_SXM = ["NVIDIA A100-SXM4-80GB"] * 8  # what `nvidia-smi -L` names on that box (the stage passes it)


def gpu_slice(stem: str, keep: list[int]):
    """The matrix a box (or VM) holding only GPUs `keep` of a real capture shows, renumbered GPU0…"""
    t = topo(stem)
    names = {f"GPU{old}": f"GPU{i}" for i, old in enumerate(keep)}
    olds = list(names)
    t.links = {f"{names[a]}-{names[b]}": t.link(a, b) for i, a in enumerate(olds) for b in olds[i + 1 :]}
    t.gpus = list(names.values())
    t.numa_affinity = t.cpu_affinity = None
    return t


# ---------------------------------------------------------------- switched boxes


def test_healthy_nvswitch_boxes_pass():
    for stem in (
        SWITCHED,
        "30-h100-8gpu-nv18-8nic-env-dump",
        "11-h100-4gpu-nv18-8nic-phb",
        "26-gb200-4gpu-nv18",
    ):
        v = verdicts(topo(stem))["topology.links"]
        assert v.status == "pass", (stem, v)


def test_nvswitch_box_with_one_sys_pair_fails():
    t = topo(SWITCHED, break_link(SWITCHED, 3, 6, "SYS"))
    assert t.links["GPU3-GPU6"] == "SYS"
    v = verdicts(t, A100_SXM)["topology.links"]
    assert v.status == "fail"
    assert "GPU3-GPU6 SYS without NVLink" in v.reason
    assert v.observed == "27×NV12 + 1×SYS"
    assert "nvidia-smi nvlink -s" in v.reason  # says what to do next


def test_nvswitch_box_with_a_gpu_cut_off_fails():
    t = topo(SWITCHED)
    for other in range(7):
        t.links[f"GPU{other}-GPU7"] = "SYS"
    # 21 pairs NV12, GPU7 on SYS to all seven. The GPU model (A100 SXM4 ships only on switch boards) says
    # switched; without it the matrix alone reads as a mesh with one GPU left out, which warns.
    assert classify(t.gpus, t.links, A100_SXM[0]).kind == "switched"
    v = verdicts(t, A100_SXM)["topology.links"]
    assert v.status == "fail" and "GPU0-GPU7 SYS" in v.reason
    assert verdicts(t)["topology.links"].status == "warn"


def test_differing_nvlink_count_on_a_switched_box_fails():
    t = topo(SWITCHED, break_link(SWITCHED, 0, 5, "NV6"))
    v = verdicts(t, A100_SXM)["topology.links"]
    assert v.status == "fail"
    assert "GPU0-GPU5 NV6 with a different NVLink count" in v.reason


def test_four_gpu_slice_losing_one_gpu_fails():
    t = topo("25-h100-4gpu-nv6-4nic-numa-3175")
    for other in range(3):
        t.links[f"GPU{other}-GPU3"] = "SYS"
    v = verdicts(t, ["NVIDIA H100 80GB HBM3"] * 4)["topology.links"]
    assert v.status == "fail" and "GPU2-GPU3 SYS" in v.reason


# ---------------------------------------------------------------- meshes are decided by differing counts
# (issue 12 item 12)


def test_v100_sxm2_partial_mesh_passes_with_its_node_pairs_noted():
    # GPUs 0, 1, 4, 5 of a V100 SXM2 hybrid cube mesh: NV2/NV1 pairs and two NODE pairs. Before, each GPU's
    # 2 = n−2 NVLink peers marked it "switched" and it failed with "NVLinks are down".
    t = gpu_slice("33-v100-8gpu-hybrid-cube-mesh-node", [0, 1, 4, 5])
    assert t.links == {
        "GPU0-GPU1": "NV2",
        "GPU0-GPU2": "NV1",
        "GPU0-GPU3": "NODE",
        "GPU1-GPU2": "NODE",
        "GPU1-GPU3": "NV1",
        "GPU2-GPU3": "NV2",
    }
    for names in (None, ["Tesla V100-SXM2-32GB"] * 4):
        assert classify(t.gpus, t.links, names and names[0]).kind == "nvlink-mesh"
        v = verdicts(t, names)["topology.links"]
        assert v.status == "pass", v
        assert "GPU0-GPU3 NODE, GPU1-GPU2 NODE: 2 pairs without NVLink, by design" in v.reason


def test_dgx1_four_gpu_slice_with_differing_counts_is_a_mesh():
    # GPUs 0-3 of a DGX-1: NVLink on every pair but NV1 and NV2 mixed. Before: "every pair NV#" made it
    # switched and the differing counts failed it.
    t = gpu_slice("01-dgx1-v100-8gpu-mlx5", [0, 1, 2, 3])
    assert set(t.links.values()) == {"NV1", "NV2"} and len(t.links) == 6
    assert classify(t.gpus, t.links).kind == "nvlink-mesh"
    assert verdicts(t, ["Tesla V100-SXM2-16GB"] * 4)["topology.links"].status == "pass"


def test_uniform_count_on_every_pair_is_switched():
    t = topo("25-h100-4gpu-nv6-4nic-numa-3175")
    box = classify(t.gpus, t.links)
    assert box.kind == "switched" and "all NV6" in box.why


# ---------------------------------------------------------------- point-to-point meshes: SYS by design


@pytest.mark.parametrize(
    "stem",
    [
        "01-dgx1-v100-8gpu-mlx5",
        "27-dgx1-p100-8gpu-soc-nv1-mangled-header",
        "21-traverse-v100-4gpu-nv3-pairs-power9",
    ],
)
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


@pytest.mark.parametrize(
    "stem,crossing",
    [
        ("14-rtx4090-8gpu-sys-2nic", 28),
        ("20-della-a100-2gpu-sys-cross-numa-2nic", 1),
        ("22-tf-gdr-4gpu-soc-legend-mlx4", 4),
        ("05-a100-pcie-2gpu-node-1nic", 0),
        ("31-l40s-2gpu-node-vllm-collect-env", 0),
    ],
)
def test_pcie_boxes_pass_with_cross_numa_pairs_noted(stem, crossing):
    v = verdicts(topo(stem))
    assert v["topology.links"].status == "pass"
    assert v["topology.numa"].status == ("warn" if crossing else "pass")  # a SYS hop warns, never fails
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


@pytest.mark.parametrize(
    "name,full",
    [
        ("NVIDIA H100 80GB HBM3", True),
        ("NVIDIA H100 PCIe", False),
        ("NVIDIA H100 NVL", False),
        ("NVIDIA H200", True),
        ("NVIDIA H200 NVL", False),
        ("NVIDIA A100-SXM4-80GB", True),
        ("NVIDIA A100-PCIE-40GB", False),
        ("Tesla V100-SXM2-16GB", False),
        ("NVIDIA B200", True),
        ("NVIDIA GeForce RTX 4090", False),
        ("NVIDIA GB200", True),
        ("NVIDIA H800", True),
        (None, False),
    ],
)
def test_which_models_link_every_pair(name, full):
    assert expects_full_nvlink(name) is full


@pytest.mark.parametrize(
    "stem,klass",
    [
        ("30-h100-8gpu-nv18-8nic-env-dump", "NV18"),
        ("29-a100-8gpu-nv12-10nic-4numa", "NV12"),
        ("01-dgx1-v100-8gpu-mlx5", "NVLink mesh"),
        ("14-rtx4090-8gpu-sys-2nic", "PCIe"),
        ("16-tesla-p4-1gpu", "single"),
    ],
)
def test_link_class_for_the_bandwidth_stage(stem, klass):
    t = topo(stem)
    assert link_class(t.links, t.gpus) == klass
