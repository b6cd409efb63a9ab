"""Fabric error counters before/after a load: IB ports read from a sysfs tree laid out as the kernel lays it
out, growth named per port and counter, the data counters never compared, a host without fabric skipped."""

from __future__ import annotations

from suite.hardware import fabric_counters as fabric


def port(root, device: str, n: int, **counters: int) -> None:
    folder = root / device / "ports" / str(n) / "counters"
    folder.mkdir(parents=True, exist_ok=True)
    for name, value in counters.items():
        (folder / name).write_text(f"{value}\n")


def test_growth_is_named_per_port_and_counter(tmp_path):
    port(tmp_path, "mlx5_0", 1, symbol_error=0, link_downed=0, port_xmit_data=10)
    port(tmp_path, "mlx5_1", 1, symbol_error=3, port_rcv_errors=0)
    before = fabric.read_ib(tmp_path)
    # no data counter
    assert before == {
        "mlx5_0 port 1 link_downed": 0,
        "mlx5_0 port 1 symbol_error": 0,
        "mlx5_1 port 1 port_rcv_errors": 0,
        "mlx5_1 port 1 symbol_error": 3,
    }
    port(tmp_path, "mlx5_0", 1, symbol_error=0, link_downed=1, port_xmit_data=99999)
    port(tmp_path, "mlx5_1", 1, symbol_error=10, port_rcv_errors=0)
    rows = fabric.growth_rows(before, fabric.read_ib(tmp_path), stage="burnin")
    verdict = fabric.fabric_verdict(rows, stage="burnin")
    assert verdict.status == "fail" and verdict.id == "burnin.fabric"
    assert verdict.observed == "mlx5_0 port 1 link_downed +1; mlx5_1 port 1 symbol_error +7"


def test_quiet_counters_pass_and_no_fabric_skips(tmp_path):
    port(tmp_path, "mlx5_0", 1, symbol_error=2)
    same = fabric.read_ib(tmp_path)
    assert fabric.fabric_verdict(fabric.growth_rows(same, same, stage="dp"), stage="dp").status == "pass"
    assert fabric.fabric_verdict([], stage="burnin").status == "skip"
    assert fabric.read_ib(tmp_path / "absent") == {}
