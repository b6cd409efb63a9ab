"""Across nodes, NCCL's network judged on its own (suite/stages/bandwidth/transport_judge.py): NCCL's real
debug lines (tests/data/nccl-net/README.md) with the RDMA ports topology found (real `ibstat` captures,
tests/data/health/README.md). A sockets fallback fails where a node has RDMA ports, whatever the floor said;
GPUDirect RDMA off on an RDMA transport fails."""

from __future__ import annotations

from pathlib import Path

from suite.cluster.node_nics import Nic, nics_from_ports, rdma_ports, rows_for, with_sysfs_rate
from suite.parsers.ibstat import parse_ibstat
from suite.parsers.nccl_net import parse_nccl_net
from suite.stages import _nccl_net
from suite.stages.bandwidth import nodes as bandwidth_nodes

DATA = Path(__file__).resolve().parents[1] / "data"
NET = DATA / "nccl-net"
IB = (NET / "01-ib-4hca-rccl-issue419.txt").read_text()
SOCKETS = (NET / "02-socket-no-ib-device-oneflow-pr9115.txt").read_text()
EFA = (NET / "03-efa-p4d-2node-gdrdma-aws-efa-eks.txt").read_text()
H100_PORTS = nics_from_ports(parse_ibstat((DATA / "health/ibstat-03-h100-node-all-active.txt").read_text()))
ETHERNET_ONLY = [Nic("ens5", "ethernet", "up", 100.0)]


def rows_of(tmp_path: Path, log: str, name: str = "run") -> list:
    raw = tmp_path / name
    raw.mkdir()
    (raw / "all_reduce_perf.nccl-debug.node-a.4242").write_text(log)
    return _nccl_net.transport_rows("bandwidth", raw, "all_reduce_perf")


def facts_with(ports_a, ports_b) -> dict:
    rows = rows_for("node-a", ports_a, []) + rows_for("node-b", ports_b, [])
    return {"node_rdma": rdma_ports(rows), "profile": {"nodes": ["node-a", "node-b"]}}


def verdicts(rows, facts) -> dict:
    return {v.id: v for v in bandwidth_nodes.judge_peak({}, "nccl-tests", facts, rows)}


def test_the_efa_log_names_its_plugin_and_every_channel_over_gdr():
    net = parse_nccl_net(EFA)
    assert net.transport == "AWS Libfabric" and not net.sockets  # `Using network AWS Libfabric`: two words
    assert (net.net_channels, net.gdr_channels, net.gdr) == (64, 64, "on")
    ib = parse_nccl_net(IB)
    assert ib.transport == "IB" and ib.gdr is None  # its 12 lines hold no channel line


def test_a_sockets_fallback_fails_on_nodes_with_rdma_ports(tmp_path):
    rows = rows_of(tmp_path, SOCKETS)
    v = verdicts(rows, facts_with(H100_PORTS, H100_PORTS))
    transport = v["bandwidth.inter_transport"]
    assert transport.status == "fail"
    assert "NCCL used sockets: over eno1:192.168.1.15<0>" in transport.observed
    assert (
        "node node-a: mlx5_0/1 roce 400 Gb/s" in transport.observed and "node node-b:" in transport.observed
    )
    assert "bandwidth.inter_gdr" not in v  # nothing to say of GPUDirect over TCP


def test_sockets_pass_where_no_node_has_an_rdma_port_and_warn_where_unknown(tmp_path):
    rows = rows_of(tmp_path, SOCKETS)
    assert (
        verdicts(rows, facts_with(ETHERNET_ONLY, ETHERNET_ONLY))["bandwidth.inter_transport"].status == "pass"
    )
    assert verdicts(rows, {"profile": {"nodes": ["a", "b"]}})["bandwidth.inter_transport"].status == "warn"


def test_rdma_passes_and_gdr_off_or_partial_is_named(tmp_path):
    facts = facts_with(H100_PORTS, H100_PORTS)
    v = verdicts(rows_of(tmp_path, EFA, "efa"), facts)
    assert (
        v["bandwidth.inter_transport"].status == "pass"
        and "AWS Libfabric" in v["bandwidth.inter_transport"].observed
    )
    assert v["bandwidth.inter_gdr"].status == "pass" and "64 of 64" in v["bandwidth.inter_gdr"].observed
    # the same log with its channels' /GDRDMA taken off (all, then every other line's): through host memory
    off = verdicts(rows_of(tmp_path, EFA.replace("/GDRDMA", ""), "off"), facts)["bandwidth.inter_gdr"]
    assert off.status == "fail" and "on 0 of 64" in off.observed and "host memory" in off.reason
    lines = EFA.splitlines(keepends=True)
    half = "".join(line.replace("/GDRDMA", "") if i % 2 else line for i, line in enumerate(lines))
    assert verdicts(rows_of(tmp_path, half, "half"), facts)["bandwidth.inter_gdr"].status == "warn"
    # NCCL's own line for an HCA it cannot use GPUDirect with, and no channel line
    disabled = IB + "node-a:1:1 [0] NCCL INFO NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0'\n"
    assert parse_nccl_net(disabled).gdr == "off" and "mlx5_0" in parse_nccl_net(disabled).gdr_text()
    assert verdicts(rows_of(tmp_path, IB, "ib"), facts)["bandwidth.inter_gdr"].status == "skip"


def test_no_network_line_leaves_the_transport_open(tmp_path):
    assert rows_of(tmp_path, "no NCCL here\n") == []
    v = verdicts([], facts_with(H100_PORTS, H100_PORTS))
    assert v["bandwidth.inter_transport"].status == "skip" and "bandwidth.inter_gdr" not in v


def test_a_port_without_a_rate_takes_the_kernels(tmp_path):
    port = tmp_path / "infiniband/mlx5_0/ports/1"
    port.mkdir(parents=True)
    (port / "rate").write_text("400 Gb/sec (4X NDR)\n")
    bare = Nic("mlx5_0/1", "infiniband", "Active", None)
    assert with_sysfs_rate(bare, tmp_path).rate_gbps == 400.0
    assert with_sysfs_rate(Nic("mlx5_1/1", "infiniband", "Active", None), tmp_path).rate_gbps is None
    assert rdma_ports(rows_for("n", [bare, *ETHERNET_ONLY], [])) == {"n": ["mlx5_0/1 infiniband"]}
