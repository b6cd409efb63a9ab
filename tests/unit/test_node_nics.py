"""Topology's per-node NIC comparison (suite/cluster/node_nics.py) on real captures: `ibstat` of a healthy
12-port H100 RoCE node (ibstat-03), of the same build with two ports down (ibstat-02), of an 8-HCA A100
InfiniBand node at 200 Gb/s whose listing ended in `ibpanic` (ibstat-04), `ibv_devinfo` with a port down
(tests/data/health/README.md), and this machine's own /sys/class/net."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from suite.cluster.node_nics import (
    from_rows,
    judge,
    local_nics,
    nics_from_ports,
    problems,
    rows_for,
    talked_over,
)
from suite.parsers.ibstat import parse_ibstat, parse_ibv_devinfo

DATA = Path(__file__).resolve().parents[1] / "data" / "health"


def ibstat(name: str):
    parsed = parse_ibstat((DATA / name).read_text())
    return nics_from_ports(parsed), parsed["errors"]


HEALTHY, _ = ibstat("ibstat-03-h100-node-all-active.txt")
TWO_DOWN, _ = ibstat("ibstat-02-h100-node-roce-port-down-polling.txt")
A100, PANIC = ibstat("ibstat-04-a100-8hca-ibpanic-mlx5_8.txt")


def test_the_captures_hold_what_the_readme_says():
    assert len(HEALTHY) == 12 and all(n.up and n.kind == "roce" for n in HEALTHY)
    assert sorted(n.rate_gbps for n in HEALTHY) == [100] * 4 + [400] * 8
    assert sorted(n.name for n in TWO_DOWN if not n.up) == ["mlx5_11/1", "mlx5_5/1"]
    assert len(A100) == 8 and {n.rate_gbps for n in A100} == {200} and len(PANIC) == 1


def test_two_healthy_nodes_agree():
    assert problems({"gpu-a": HEALTHY, "gpu-b": HEALTHY}, {}) == []


def test_a_port_down_names_the_node_and_port():
    found = problems({"gpu-a": HEALTHY, "gpu-b": TWO_DOWN}, {})
    assert found == [
        "node gpu-b: mlx5_11/1 is Down (Polling): reseat or replace its cable, or ask the provider to "
        "fix the port",
        "node gpu-b: mlx5_5/1 is Down (Disabled): reseat or replace its cable, or ask the provider to "
        "fix the port",
    ]


def test_a_missing_nic_a_lower_rate_and_a_read_error_are_each_named():
    found = problems({"gpu-a": HEALTHY, "gpu-c": A100}, {"gpu-c": PANIC}, ["gpu-a", "gpu-c", "gpu-d"])
    assert found[0].startswith("node gpu-d: reported no NICs")
    assert (
        found[1]
        == "node gpu-c: ibpanic: [1400444] main: stat of IB device 'mlx5_8' failed: No such file or directory"
    )
    assert (
        "node gpu-c: no mlx5_10/1, mlx5_11/1, mlx5_8/1, mlx5_9/1, which node gpu-a has: the node was rented "
        "with "
        "fewer NICs or a driver did not load (ibstat / ip link there)"
    ) in found
    assert (
        "node gpu-c: mlx5_0/1 at 200 Gb/s where node gpu-a has 400 Gb/s: the link trained down (cable, "
        "switch port "
        "or speed setting)" in found
    )
    # gpu-a's 100 Gb/s ports are slower than gpu-c's 200 Gb/s ones of the same name: named too (the rule is
    # per NIC).
    assert sum("node gpu-a:" in line for line in found) == 3 and not any(
        "gpu-a: no " in line for line in found
    )


def test_ibv_devinfo_port_down():
    parsed = parse_ibv_devinfo((DATA / "ibv-devinfo-01-deepep-cx6dx-port-down.txt").read_text())
    up = parse_ibv_devinfo((DATA / "ibv-devinfo-02-deepep-h100-roce-active.txt").read_text())
    down = [n for n in nics_from_ports(parsed) if not n.up]
    assert [n.name for n in down] == ["mlx5_12/1"] and all(n.up for n in nics_from_ports(up))
    assert problems({"a": nics_from_ports(parsed)}, {}) == [
        "node a: mlx5_12/1 is Down: reseat or replace its cable, or ask the provider to fix the port"
    ]


def test_rows_round_trip_and_the_verdict():
    rows = rows_for("gpu-a", HEALTHY, []) + rows_for("gpu-b", TWO_DOWN, [])
    per_node, errors = from_rows(rows)
    assert per_node == {"gpu-a": HEALTHY, "gpu-b": TWO_DOWN} and errors == {}
    (verdict,) = judge(rows, ["root@gpu-a", "root@gpu-b:2222"])
    assert (
        verdict.id == "topology.nics"
        and verdict.status == "fail"
        and "node gpu-b: mlx5_11/1 is Down" in verdict.observed
    )
    (verdict,) = judge(rows_for("gpu-a", HEALTHY, []) + rows_for("gpu-b", HEALTHY, []), ["gpu-a", "gpu-b"])
    assert verdict.status == "pass" and verdict.observed == "2 nodes × 12 NICs, all up"
    assert judge(rows, ["gpu-a"]) == []  # one node: nothing to compare
    (verdict,) = judge(rows_for("gpu-a", HEALTHY, []), ["gpu-a", "gpu-b"])
    assert verdict.status == "fail" and "node gpu-b: reported no NICs" in verdict.observed


def test_this_machines_interfaces():
    """/sys/class/net here: the named interface is reported whatever it is; a name that does not exist is an
    error."""
    nics, errors = local_nics(None, ["lo", "nosuch0"])
    lo = [n for n in nics if n.name == "lo"]
    assert len(lo) == 1 and lo[0].kind == "ethernet" and lo[0].up and lo[0].rate_gbps is None
    assert errors == ["interface nosuch0 (--socket-ifname) does not exist here"]
    here = {line.split(":")[0].strip() for line in Path("/proc/net/dev").read_text().splitlines()[2:]}
    physical = [
        p.name for p in Path("/sys/class/net").glob("*") if (p / "device").exists() and p.name in here
    ]
    assert sorted(n.name for n in nics if n.name != "lo") == sorted(physical)
    assert all(n.rate_gbps is None or (math.isfinite(n.rate_gbps) and n.rate_gbps > 0) for n in nics)


def test_the_interfaces_the_run_talks_over():
    assert talked_over("ens5", {"NCCL_SOCKET_IFNAME": "eth0"}) == ["ens5"]
    assert talked_over("", {"NCCL_SOCKET_IFNAME": "ens5,ens6", "GLOO_SOCKET_IFNAME": "eth0"}) == [
        "ens5",
        "ens6",
    ]
    assert talked_over("", {"GLOO_SOCKET_IFNAME": "mn0"}) == ["mn0"]
    assert talked_over("", {"NCCL_SOCKET_IFNAME": "^docker,lo"}) == ["lo"] and talked_over("", {}) == []


def test_a_sys_of_another_namespace(tmp_path):
    """/sys mounted for another network namespace (slurmd under nsenter, a container): the interfaces come
    from /proc/net/dev, the named one's state from `ip`, its rate unknown; sysfs entries not in this namespace
    are left out."""
    import shutil

    if shutil.which("ip") is None:
        pytest.skip("iproute2 is not installed")
    (tmp_path / "net" / "ghost0").mkdir(parents=True)
    (tmp_path / "net" / "ghost0" / "device").mkdir()  # a "physical" NIC of another namespace
    nics, errors = local_nics(None, ["lo"], sys_root=tmp_path)
    assert errors == [] and [(n.name, n.state, n.rate_gbps, n.detail) for n in nics] == [
        ("lo", "unknown", None, "no /sys of this namespace: rate unknown")
    ]
    assert nics[0].up


def test_line_rates_and_the_node_pairs_held_to_them():
    """Each node's fastest up RDMA port (real captures: the 400 Gb/s RoCE H100 node, the 200 Gb/s A100 IB node
    with a host Ethernet beside it), else its fastest up Ethernet, is the ceiling of its pairs; a pair far
    below the slower node's fails."""
    from suite.cluster.node_nics import Nic, line_rates
    from suite.results import Row
    from suite.stages.bandwidth import node_pairs as _node_pairs

    # faster than the A100's fabric, but not NCCL's path there
    host_ethernet = Nic("ens1", "ethernet", "up", 400.0)
    rows = rows_for("h100", HEALTHY, []) + rows_for("a100", [*A100, host_ethernet], PANIC)
    rows += rows_for(
        "tcp", [Nic("eno1", "ethernet", "up", 100.0), Nic("eno2", "ethernet", "down", 400.0)], []
    )
    rates = line_rates(rows)
    assert rates == {"h100": 400.0, "a100": 200.0, "tcp": 100.0}
    speeds = {"h100→a100": 23.0, "a100→h100": 12.0}  # 200 Gb/s = 25 GB/s is their line
    v = _node_pairs.line_rate_verdict(speeds, rates)
    assert v.status == "fail" and v.observed == "a100→h100: 12.0 GB/s" and "h100→a100 25.0 GB/s" in v.expected
    assert _node_pairs.line_rate_verdict({"h100→a100": 23.0}, rates).status == "pass"
    assert _node_pairs.line_rate_verdict({"x→y": 1.0}, rates).status == "skip"  # nodes without a known rate
    gpu = {"profile": {"judge_performance": True}, "node_line_gbps": rates}
    pair_rows = [
        Row(stage="bandwidth", case=c, metric=m, value=v, unit="", source="p2p")
        for c, b in speeds.items()
        for m, v in (("busbw", b), ("wrong", 0.0))
    ]
    from suite.config import NCCL_GPU

    judged = {
        x.id: x.status
        for x in _node_pairs.judge(
            pair_rows, _node_pairs.expect(NCCL_GPU.with_overrides(nodes=("h100", "a100"))), gpu
        )
    }
    assert judged["bandwidth.p2p_line_rate"] == "fail" and judged["bandwidth.p2p_slow_pair"] == "warn"
