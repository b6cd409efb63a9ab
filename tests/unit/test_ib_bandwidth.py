"""The ib_write_bw check: ports from a sysfs tree laid out as the kernel lays it out, each GPU's nearest NIC
from a real `nvidia-smi topo -m` (tests/data/topo), the rule on figures from real perftest captures, the box
verdict."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from suite.box_verdict import ACCEPT, INCONCLUSIVE, REJECT, box_verdict
from suite.hardware import ib_bandwidth as ib
from suite.parsers import perftest
from suite.results import Row

DATA = Path(__file__).resolve().parents[1] / "data"
GPU_RUN = {"profile": {"device": "cuda", "judge_performance": True}}


def port(root: Path, device: str, n: int, rate: str, state: str = "4: ACTIVE") -> None:
    folder = root / device / "ports" / str(n)
    folder.mkdir(parents=True)
    (folder / "rate").write_text(f"{rate}\n")
    (folder / "state").write_text(f"{state}\n")
    (folder / "link_layer").write_text("InfiniBand\n")


def test_ports_read_with_rate_and_state(tmp_path):
    port(tmp_path, "mlx5_0", 1, "400 Gb/sec (4X NDR)")
    port(tmp_path, "mlx5_1", 1, "100 Gb/sec (2X NDR)", "1: DOWN")
    ports = ib.read_ports(tmp_path)
    assert [(p.name, p.rate_gbps, p.active) for p in ports] == [
        ("mlx5_0 port 1", 400.0, True),
        ("mlx5_1 port 1", 100.0, False),
    ]


def test_nearest_nic_from_real_matrices():
    """8×H100 with a NIC per GPU (tests/data/topo/30): GPU n → mlx5_n. 8×A100 with 10 NICs (29): each pair of
    GPUs shares the two NICs on its PCIe switch. DGX-1 with one NIC (01): every GPU's nearest is that one."""

    def nearest(name: str) -> dict[str, list[str]]:
        return ib.nearest_nics(json.loads((DATA / "topo" / f"{name}.json").read_text()))

    assert nearest("30-h100-8gpu-nv18-8nic-env-dump") == {f"mlx5_{n}": [f"GPU{n}"] for n in range(8)}
    assert nearest("29-a100-8gpu-nv12-10nic-4numa") == {
        f"mlx5_{n}": [f"GPU{n // 2 * 2}", f"GPU{n // 2 * 2 + 1}"] for n in range(8)
    }
    assert nearest("01-dgx1-v100-8gpu-mlx5") == {"mlx5_0": [f"GPU{n}" for n in range(8)]}


def test_pairs_serve_each_tested_port_from_the_next_and_one_nic_from_itself(tmp_path):
    for n in range(3):
        port(tmp_path, f"mlx5_{n}", 1, "400 Gb/sec (4X NDR)")
    ports = ib.read_ports(tmp_path)
    got = [(c.device, s.device, g) for c, s, g in ib.pairs(ports, {"mlx5_0": ["GPU0"], "mlx5_2": ["GPU1"]})]
    assert got == [("mlx5_0", "mlx5_1", ["GPU0"]), ("mlx5_2", "mlx5_0", ["GPU1"])]
    # HCA loopback
    assert [(c.device, s.device) for c, s, _ in ib.pairs(ports[:1], {})] == [("mlx5_0", "mlx5_0")]
    client = ib.command(ports[0], 18515, 5, "localhost")
    assert (
        client[:3] == ["ib_write_bw", "-d", "mlx5_0"]
        and client[-1] == "localhost"
        and "--report_gbits" in client
    )


def measured(name: str, avg: float, rate: float) -> list[Row]:
    base = dict(stage="burnin", case="ib_write_bw", source="perftest", unit="Gb/s")
    return [
        Row(**base, metric="rate_Gbps", value=rate, text=name),
        Row(**base, metric="avg_Gbps", value=avg, text=f"{name} (nearest to GPU0; server mlx5_1 port 1)"),
    ]


def capture_gbps(name: str) -> float:
    return perftest.average_gbps(perftest.parse((DATA / "perftest" / name).read_text()))


def test_a_port_far_below_its_rate_fails_naming_it():
    """97.66 of 100 Gb/s (a real capture) passes; the same figure on a 400 Gb/s port is a quarter of it."""
    good = measured("mlx5_0 port 1", capture_gbps("01-cx6dx-roce-100g-D600.txt"), 100.0)
    assert ib.ib_verdict(good, on_gpu=True, stage="burnin").status == "pass"
    bad = good + measured("mlx5_3 port 1", capture_gbps("01-cx6dx-roce-100g-D600.txt"), 400.0)
    verdict = ib.ib_verdict(bad, on_gpu=True, stage="burnin")
    assert verdict.status == "fail" and verdict.id == "burnin.ib_write_bw"
    assert verdict.observed == "mlx5_3 port 1 97.7 of 400 Gb/s"
    assert box_verdict(GPU_RUN, [verdict]).word == REJECT


def test_without_perftest_the_check_stays_open_with_the_install_line(tmp_path):
    port(tmp_path, "mlx5_0", 1, "400 Gb/sec (4X NDR)")
    if shutil.which(ib.TOOL):
        pytest.skip("ib_write_bw is installed here: the missing-tool path cannot be shown")
    rows = ib.measure(ib.read_ports(tmp_path), {}, tmp_path, seconds=1, stage="burnin")
    verdict = ib.ib_verdict(rows, on_gpu=True, stage="burnin")
    assert verdict.status == "skip" and "apt-get install perftest" in verdict.reason
    box = box_verdict(GPU_RUN, [verdict])
    assert box.word == INCONCLUSIVE and [(o.id, o.why) for o in box.open] == [
        ("burnin.ib_write_bw", verdict.reason)
    ]


def test_no_hca_does_not_apply_and_the_rehearsal_says_why(tmp_path):
    rows = ib.measure(ib.read_ports(tmp_path / "none"), {}, tmp_path, seconds=1, stage="burnin")
    verdict = ib.ib_verdict(rows, on_gpu=True, stage="burnin")
    assert verdict.status == "skip" and box_verdict(GPU_RUN, [verdict]).word == ACCEPT
    cpu = ib.ib_verdict([], on_gpu=False, stage="burnin")
    assert cpu.status == "skip" and "no HCA" in cpu.reason


def test_a_pair_without_result_is_open_not_passed():
    rows = measured("mlx5_0 port 1", float("nan"), 400.0)
    verdict = ib.ib_verdict(rows, on_gpu=True, stage="burnin")
    assert verdict.status == "skip" and box_verdict(GPU_RUN, [verdict]).word == INCONCLUSIVE


def test_ports_all_down_leave_the_check_open(tmp_path):
    port(tmp_path, "mlx5_0", 1, "400 Gb/sec (4X NDR)", "1: DOWN")
    rows = ib.measure(ib.read_ports(tmp_path), {}, tmp_path, seconds=1, stage="burnin")
    verdict = ib.ib_verdict(rows, on_gpu=True, stage="burnin")
    assert verdict.status == "skip" and "no ACTIVE IB port" in verdict.reason
