"""`nvidia-smi -q`/`-L`, `lscpu` and `numactl -H` parsers on real captures (tests/data/smi,
tests/data/cpu)."""

from __future__ import annotations

from pathlib import Path

import pytest

from suite.parsers import ParseError
from suite.parsers.cpu import cpulist_count, parse_lscpu, parse_numactl_hardware, to_cpulist
from suite.parsers.smi_query import parse_list, parse_query

DATA = Path(__file__).resolve().parent.parent / "data"


def read(*parts: str) -> str:
    return DATA.joinpath(*parts).read_text(encoding="utf-8")


def test_query_full_capture():
    q = parse_query(read("smi", "rtx4070-laptop-q.txt"))
    assert (q["driver_version"], q["cuda_version"], q["attached_gpus"]) == ("566.36", "12.7", 1)
    gpu = q["gpus"][0]
    assert gpu["bus_id"] == "00000000:01:00.0" and gpu["product_name"] == "NVIDIA GeForce RTX 4070 Laptop GPU"
    # "PCIe Generation / Max : 4", "Link Width / Max : 8x" under PCI / GPU Link Info
    assert (
        gpu["pcie_gen_max"],
        gpu["pcie_gen_current"],
        gpu["link_width_max"],
        gpu["link_width_current"],
    ) == (4, 4, 8, 8)
    assert gpu["fabric_state"] is None  # "State : N/A"


def test_query_with_a_foreign_log_line_and_the_2018_layout():
    q = parse_query(read("smi", "v100-pcie-q-hami-interleaved-head.txt"))
    assert (q["driver_version"], q["cuda_version"]) == ("535.86.10", "12.2")
    assert q["gpus"][0]["product_name"] == "Tesla V100-PCIE-16GB"
    old = parse_query(read("smi", "quadro-m1000m-q-2018-head.txt"))
    assert (old["driver_version"], old["cuda_version"]) == ("375.82", None)
    assert old["gpus"][0]["bus_id"] == "0000:01:00.0"


def test_query_fabric_state_and_the_r610_banner_names():
    text = read("smi", "rtx4070-laptop-q.txt")
    text = text.replace(
        "        State                             : N/A",
        "        State                             : In Progress",
    )
    text = text.replace("Driver Version   ", "KMD Version      ").replace(
        "CUDA Version     ", "CUDA UMD Version "
    )
    q = parse_query(text)
    assert q["gpus"][0]["fabric_state"] == "In Progress"
    assert (q["driver_version"], q["cuda_version"]) == ("566.36", "12.7")


def test_query_rejects_other_text():
    with pytest.raises(ParseError, match="not `nvidia-smi -q` output"):
        parse_query(read("topo", "01-dgx1-v100-8gpu-mlx5.txt"))


def test_list():
    assert parse_list(read("smi", "quadro-rtx4000-2gpu-L.txt")) == [
        {"index": 0, "name": "Quadro RTX 4000", "uuid": "GPU-c7b57be0-94ff-d352-a59b-d0ee00aeed43"},
        {"index": 1, "name": "Quadro RTX 4000", "uuid": "GPU-d6de6afc-bdfe-75c4-5273-0544439153fc"},
    ]
    assert parse_list(read("smi", "rtx4070-laptop-L.txt"))[0]["name"] == "NVIDIA GeForce RTX 4070 Laptop GPU"


def test_lscpu_two_sockets_interleaved_numa():
    info = parse_lscpu(read("cpu", "xeon-8562y-2socket-lscpu.txt"))
    assert info["model"] == "INTEL(R) XEON(R) PLATINUM 8562Y+"
    assert (info["cpus"], info["sockets"], info["cores_per_socket"], info["threads_per_core"]) == (
        128,
        2,
        32,
        2,
    )
    assert info["numa_nodes"] == 2
    assert cpulist_count(info["numa_cpus"]["node0"]) == 64 and info["numa_cpus"]["node1"].startswith("1,3,5,")


def test_numactl_hardware():
    nodes = parse_numactl_hardware(read("cpu", "k80-2node-numactl-H.txt"))
    assert nodes == {
        "node0": {"cpus": "0-11", "size_mb": 32663},
        "node1": {"cpus": "12-23", "size_mb": 32768},
    }


def test_cpulists():
    assert cpulist_count("0-11,24-35") == 24 and cpulist_count("1-1") == 1 and cpulist_count("N/A") is None
    assert to_cpulist([3, 0, 1, 2, 8, 10, 11]) == "0-3,8,10-11"
    with pytest.raises(ValueError):
        cpulist_count("zero")
