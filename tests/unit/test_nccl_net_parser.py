"""NCCL_DEBUG=INFO's network lines (suite/parsers/nccl_net.py) on real captures
(tests/data/nccl-net/README.md)."""

from __future__ import annotations

from pathlib import Path

from suite.parsers.nccl_net import parse_nccl_net

DATA = Path(__file__).resolve().parents[1] / "data"


def test_ib_capture():
    net = parse_nccl_net((DATA / "nccl-net" / "01-ib-4hca-rccl-issue419.txt").read_text())
    assert net.transport == "IB" and not net.sockets and not net.ib_missing
    assert net.ib_devices == ["mlx5_3:1/IB", "mlx5_2:1/IB", "mlx5_1:1/IB", "mlx5_0:1/IB"]
    assert net.why_sockets() == ""


def test_socket_fallback_without_an_ib_device():
    net = parse_nccl_net((DATA / "nccl-net" / "02-socket-no-ib-device-oneflow-pr9115.txt").read_text())
    assert net.transport == "Socket" and net.sockets and net.ib_missing and net.ib_devices == []
    assert net.socket_interfaces[0] == "eno1:192.168.1.15<0>" and len(net.socket_interfaces) == 3
    said = net.why_sockets()
    assert said.startswith("NCCL used sockets: over eno1:192.168.1.15<0>, veth2ea2288:")
    assert "NET/IB found no device" in said and "/dev/infiniband" in said


def test_socket_run_in_an_nccl_tests_capture():
    text = (DATA / "nccl-tests" / "17-rtx5090-all_reduce-2gpu-aborted-ncclwarn-test-failure.txt").read_text()
    net = parse_nccl_net(text)
    assert (
        net.transport == "Socket"
        and not net.ib_missing
        and net.socket_interfaces[0] == "enp227s0f0:192.168.1.250<0>"
    )
    assert "IB not tried or disabled" in net.why_sockets()
    assert parse_nccl_net("no nccl lines\n").transport is None


def test_a_missed_inter_node_floor_over_sockets_says_so(tmp_path):
    """The debug files of a run (here the real socket capture, as NCCL_DEBUG_FILE would hold it) → the
    transport row → the inter-node floor's reason names sockets, not the fabric; an IB run keeps the generic
    reason."""
    from suite.stages import _nccl_net
    from suite.stages.bandwidth import intra_judges as _intra_judges

    facts = {
        "node_nics": {n: {"nics": 1, "line_gbps": 400.0, "total_gbps": 400.0} for n in ("a", "b")},
        "profile": {"nodes": ["a", "b"]},
    }
    curve = {"all_reduce": {1 << 30: 3.0}}
    for name, says in (
        ("02-socket-no-ib-device-oneflow-pr9115.txt", "NCCL used sockets: over eno1"),
        ("01-ib-4hca-rccl-issue419.txt", "NCCL on TCP instead of IB/RoCE/EFA"),
    ):
        raw = tmp_path / name
        raw.mkdir()
        (raw / "all_reduce_perf.nccl-debug.gpu-a.4242").write_text((DATA / "nccl-net" / name).read_text())
        row, gdr = _nccl_net.transport_rows("bandwidth", raw, "all_reduce_perf")
        assert gdr.metric == "gdr" and gdr.text == "GPUDirect RDMA: no network channel line"
        assert row.value == (0.0 if "socket" in name else 1.0)
        (verdict,) = _intra_judges.judge_inter_peak(curve, "nccl-tests", facts, [row])
        assert verdict.status == "fail" and says in verdict.reason, verdict
