"""The health stage's parsers on real captures (tests/data/health/README.md names each one's source).

The first seven captures carry hand-checked expected values in a .json beside them; the others' values below
were read off the files by hand. Cut or garbled input raises ParseError naming the line, and `suite parse`
turns it into one line and exit 2.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from suite.parsers import ParseError, dcgm, ibstat, nvlink, smi_health, xid
from suite.stages.health.rules import smi_verdicts

DATA = Path(__file__).resolve().parents[1] / "data" / "health"
ROOT = Path(__file__).resolve().parents[2]


def capture(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


def expected(name: str) -> dict:
    return json.loads((DATA / name.replace(".txt", ".json")).read_text())["expected"]


def test_every_capture_is_named_in_the_readme():
    readme = (DATA / "README.md").read_text()
    files = sorted(p.name for p in DATA.glob("*.txt"))
    assert len(files) >= 21
    assert [f for f in files if f not in readme] == []


# ---------------------------------------------------------------- nvidia-smi -q


@pytest.mark.parametrize(
    "name",
    [
        "nvsmi-q-02-a10-remapped-rows-pending-535.txt",
        "nvsmi-q-08-h200-550-healthy.txt",
        "nvsmi-q-10-rtx4060ti-x2-one-at-x4-of-x8-550.txt",
    ],
)
def test_smi_q_health_fields_match_the_hand_checked_values(name):
    want, got = expected(name), smi_health.parse(capture(name))
    assert (got["driver_version"], got["cuda_version"], got["attached_gpus"]) == (
        want["driver_version"],
        want["cuda_version"],
        want["attached_gpus"],
    )
    assert len(got["gpus"]) == want["gpus_in_text"] == len(want["gpus"]) >= 1
    for g, w in zip(got["gpus"], want["gpus"]):
        assert (g["bus_id"], g["product_name"], g["performance_state"]) == (
            w["bus_id"],
            w["product_name"],
            w["performance_state"],
        )
        assert (g["pcie_gen_current"], g["pcie_gen_max"]) == (
            int(w["pcie_gen"]["current"]),
            int(w["pcie_gen"]["max"]),
        )
        assert (g["link_width_current"], g["link_width_max"]) == (
            int(w["link_width"]["current"].rstrip("x")),
            int(w["link_width"]["max"].rstrip("x")),
        )
        assert g["ecc_mode_current"] == w["ecc_mode_current"]
        assert g["ecc_errors"] == w["ecc_errors"] and g["ecc_nonzero"] == w["ecc_nonzero"]
        assert g["retired_pages"] == w["retired_pages"] and g["remapped_rows"] == w["remapped_rows"]
        assert g["clock_reasons_section"] == w["clock_reasons_section"]
        assert g["active_clock_reasons"] == w["active_clock_reasons"]


def test_smi_q_h100x8_power_brake_active_on_every_gpu():
    got = smi_health.parse(capture("nvsmi-q-11-h100x8-535-hw-power-brake-active.txt"))
    assert (got["driver_version"], got["attached_gpus"], len(got["gpus"])) == ("535.161.08", 8, 8)
    assert {g["product_name"] for g in got["gpus"]} == {"NVIDIA H100 80GB HBM3"}
    assert [g["active_clock_reasons"] for g in got["gpus"]] == [
        ["HW Slowdown", "HW Power Brake Slowdown"]
    ] * 8
    assert [g["pcie_replays"] for g in got["gpus"]] == [67, 63, 52, 43, 49, 53, 82, 67]
    assert {(g["pcie_gen_current"], g["link_width_current"]) for g in got["gpus"]} == {(5, 16)}
    assert {(g["power_limit_w"], g["power_default_w"]) for g in got["gpus"]} == {(700.0, 700.0)}
    assert {(g["fabric_state"], g["fabric_status"]) for g in got["gpus"]} == {("Completed", "Success")}
    assert {g["mig_mode_current"] for g in got["gpus"]} == {"Disabled"}
    assert got["processes"] == []


def test_smi_q_processes_on_eight_rtx4090s_are_all_found():
    """Before the fix, the next GPU block's `Bridge Chip / Type : N/A` overwrote each process's type: 1 of 7
    found."""
    got = smi_health.parse(capture("nvsmi-q-12-rtx4090x8-535-compute-processes.txt"))
    procs = got["processes"]
    assert len(procs) == 7 and {p["type"] for p in procs} == {"C"}
    assert [p["pid"] for p in procs] == [
        "58130",
        "2930819",
        "2146842",
        "3159481",
        "1100070",
        "1375347",
        "1102861",
    ]
    assert procs[0] == {
        "gpu": "00000000:01:00.0",
        "pid": "58130",
        "type": "C",
        "name": "/usr/bin/python",
        "memory": "20322 MiB",
    }
    assert [g["performance_state"] for g in got["gpus"]].count("P2") == 5


def test_smi_q_idle_rtx4090s_at_gen1_and_a_titan_v_without_remapping():
    idle = smi_health.parse(capture("nvsmi-q-13-rtx4090x8-535-idle-gen1.txt"))
    assert {(g["pcie_gen_current"], g["pcie_gen_max"], g["performance_state"]) for g in idle["gpus"]} == {
        (1, 4, "P8")
    }
    assert len(idle["processes"]) == 8
    titan = smi_health.parse(capture("nvsmi-q-14-titanv-560-desktop-processes.txt"))
    assert (titan["driver_version"], titan["cuda_version"]) == ("560.35.03", "12.6")
    g = titan["gpus"][0]
    assert (
        g["product_name"] == "NVIDIA TITAN V" and g["remapped_rows"] == {} and g["ecc_mode_current"] == "N/A"
    )
    assert [p["type"] for p in titan["processes"]] == ["G", "G", "G"]


def test_smi_q_cut_short_names_the_line():
    with pytest.raises(ParseError, match=r"^line 91: 'Attached GPUs : 8' but the file holds 1 GPU block"):
        smi_health.parse(capture("nvsmi-q-15-h100-535-cut-at-line-91-edited.txt"))
    text = capture("nvsmi-q-08-h200-550-healthy.txt")
    cut = text[: text.index("    PCI\n")]  # the one block stops before its PCI section
    with pytest.raises(ParseError, match=r"^line 9: the block of GPU 00000000:03:00.0 has no PCI section"):
        smi_health.parse(cut)
    with pytest.raises(ParseError, match="not `nvidia-smi -q` output"):
        smi_health.parse(capture("ibstat-03-h100-node-all-active.txt"))


# ---------------------------------------------------------------- nvlink, ibstat, ibv_devinfo


def test_nvlink_status_of_eight_a100s():
    want, got = (
        expected("nvlink-s-01-a100x8-sxm4-12links-25gbs.txt"),
        nvlink.parse(capture("nvlink-s-01-a100x8-sxm4-12links-25gbs.txt")),
    )
    assert len(got["gpus"]) == len(want["gpus"]) == 8
    for g, w in zip(got["gpus"], want["gpus"]):
        assert (g["gpu"], g["name"]) == (w["gpu"], w["name"])
        assert {str(k): v for k, v in g["links"].items()} == w["links"]
        assert set(g["speeds_GBps"].values()) == {25.0}
    assert [s for g in got["gpus"] for s in g["speeds_GBps"].values() if s is None] == []  # none inactive


def test_nvlink_garbled_line_is_named():
    text = capture("nvlink-s-01-a100x8-sxm4-12links-25gbs.txt").splitlines()
    text.insert(5, "\x1b[?25l garbage from a terminal")
    with pytest.raises(ParseError, match=r"^line 6: "):
        nvlink.parse("\n".join(text))


def test_ibstat_port_down_and_polling_matches_the_hand_checked_ports():
    want, got = (
        expected("ibstat-02-h100-node-roce-port-down-polling.txt"),
        ibstat.parse(capture("ibstat-02-h100-node-roce-port-down-polling.txt")),
    )
    assert got["ca_count"] == want["ca_count"] == 12
    assert [{k: p[k] for k in w} for p, w in zip(got["ports"], want["ports"])] == want["ports"]
    assert len(got["ports"]) == 12 and got["errors"] == []


def test_ibstat_all_active_and_the_ibpanic_stop():
    healthy = ibstat.parse(capture("ibstat-03-h100-node-all-active.txt"))
    assert healthy["ca_count"] == 12 and {p["state"] for p in healthy["ports"]} == {"Active"}
    assert sorted(p["rate"] for p in healthy["ports"]) == [100.0] * 4 + [400.0] * 8
    stopped = ibstat.parse(capture("ibstat-04-a100-8hca-ibpanic-mlx5_8.txt"))
    assert stopped["ca_count"] == 8 and {
        (p["state"], p["rate"], p["link_layer"]) for p in stopped["ports"]
    } == {("Active", 200.0, "InfiniBand")}
    assert stopped["errors"] == [
        "ibpanic: [1400444] main: stat of IB device 'mlx5_8' failed: No such file or directory"
    ]


def test_ibv_devinfo_ports():
    down = ibstat.parse(capture("ibv-devinfo-01-deepep-cx6dx-port-down.txt"))
    assert down["tool"] == "ibv_devinfo" and down["ports"] == [
        {
            "ca": "mlx5_12",
            "ca_type": "MT4125",
            "port": 1,
            "state": "Down",
            "physical_state": None,
            "rate": None,
            "link_layer": "Ethernet",
        }
    ]
    roce = ibstat.parse(capture("ibv-devinfo-02-deepep-h100-roce-active.txt"))["ports"]
    ib = ibstat.parse(capture("ibv-devinfo-03-deepep55-ib-active.txt"))["ports"]
    assert [(p["ca"], p["state"], p["link_layer"]) for p in roce + ib] == [
        ("mlx5_2", "Active", "Ethernet"),
        ("mlx5_3", "Active", "InfiniBand"),
    ]


def test_ib_garbled_and_cut_inputs_name_the_line():
    with pytest.raises(ParseError, match=r"^line 1: .*before any `CA '…'` line"):
        ibstat.parse("\tState: Active\nCA 'mlx5_0'\n")
    cut = capture("ibv-devinfo-02-deepep-h100-roce-active.txt").split("                port:")[0]
    with pytest.raises(ParseError, match="hca mlx5_2 lists no `port:` block: the output was cut short"):
        ibstat.parse(cut)


def test_sysfs_port_files():
    port = ibstat.port_from_sysfs(
        "mlx5_0", 1, "4: ACTIVE\n", "5: LinkUp\n", "400 Gb/sec (4X NDR)\n", "InfiniBand\n"
    )
    assert port == {
        "ca": "mlx5_0",
        "ca_type": None,
        "port": 1,
        "state": "Active",
        "physical_state": "LinkUp",
        "rate": 400.0,
        "link_layer": "InfiniBand",
    }


# ---------------------------------------------------------------- dcgmi diag


def test_dcgm_table_matches_the_hand_checked_values():
    name = "dcgmi-diag-03-a10g-4gpu-dcgm339-r3-targeted-power-fail.txt"
    want, got = expected(name), dcgm.parse(capture(name))
    assert len(got["tests"]) == len(want["tests"]) == 16
    for key in (
        "dcgm_version",
        "driver_version",
        "gpu_device_ids",
        "tests",
        "per_gpu",
        "warning_rows",
        "overall",
    ):
        assert got[key] == want[key], key
    assert got["warnings"] == [
        "GPU 1 Max power of 224.1 did not reach desired power minimum target_power_min_ratio "
        "of 224.2 for GPU 1 Verify that the clock speeds and GPU utilization are high."
    ]


def test_dcgm_cut_row_and_cut_json_name_the_line():
    lines = capture("dcgmi-diag-03-a10g-4gpu-dcgm339-r3-targeted-power-fail.txt").splitlines()
    lines[12] = lines[12][:20]
    with pytest.raises(ParseError, match=r"^line 13: .* is a broken table row"):
        dcgm.parse("\n".join(lines))
    with pytest.raises(ParseError, match=r"^line 3: not valid JSON"):
        dcgm.parse('{\n  "DCGM GPU Diagnostic": {\n    "test_categories": [,\n')


def test_dcgm_json_in_the_layout_dcgm_documents():
    """No real `dcgmi diag --json` capture was found (tests/data/health/README.md): this is the layout DCGM's
    source documents (NvvsJsonStrings: statuses PASS|FAIL|WARN|SKIPPED, gpu_ids one id or a CSV), not a
    capture."""
    doc = """Successfully ran diagnostic for group.
{"DCGM GPU Diagnostic": {"version": "3.3.9", "test_categories": [
  {"category": "Deployment", "tests": [{"name": "Denylist", "results": [{"gpu_ids": "0,1", "status": "PASS"}]}]},
  {"category": "Stress", "tests": [{"name": "Targeted Power", "results": [
     {"gpu_ids": "0", "status": "PASS"},
     {"gpu_ids": "1", "status": "FAIL", "warnings": [{"warning": "GPU 1 max power 224.1 W"}]}]}]}]}}
"""  # noqa: E501
    got = dcgm.parse(doc)
    assert got["tests"] == {"Deployment/Denylist": "Pass", "Stress/Targeted Power": "Pass | Fail"}
    assert got["per_gpu"] == {"Targeted Power": {"GPU0": "Pass", "GPU1": "Fail"}}
    assert (
        got["warnings"] == ["GPU 1 max power 224.1 W"]
        and got["overall"] == "Fail"
        and got["dcgm_version"] == "3.3.9"
    )
    error = dcgm.parse('{"DCGM GPU Diagnostic": {"runtime_error": "Unable to connect to the host engine"}}')
    assert error["overall"] == "Error" and "host engine" in error["runtime_error"]


# ---------------------------------------------------------------- kernel log


def test_xid119_matches_the_hand_checked_events():
    want, got = (
        expected("xid-01-h100-xe9680-xid119-gsp-timeout.txt"),
        xid.parse(capture("xid-01-h100-xe9680-xid119-gsp-timeout.txt")),
    )
    assert [[e["bus"], e["xid"]] for e in got["xid_events"]] == want["xid_events"]
    assert got["xid_count"] == want["xid_count"] == 5 and got["xid_counts"] == want["xid_counts"]


@pytest.mark.parametrize(
    "name, counts",
    [
        ("xid-02-dmesg-iso-xid13-xid43.txt", {"0000:38:00 13": 629, "0000:38:00 43": 7}),
        (
            "xid-03-h100-akash-dmesg-T-xid43-31-94.txt",
            {"0000:00:05 43": 2, "0000:00:07 31": 1, "0000:00:08 94": 1},
        ),
        ("xid-04-gpu-operator-syslog-xid48-64-dbe.txt", {"0000:07:00 48": 1, "0000:07:00 64": 1}),
        (
            "xid-05-journalctl-k-xid45-after-149-145.txt",
            {"0000:dc:00 45": 2, "0000:ed:00 45": 2, "0000:ba:00 45": 2, "0000:97:00 45": 1},
        ),
    ],
)
def test_xid_lines_in_every_log_format(name, counts):
    got = xid.parse(capture(name))
    assert got["xid_counts"] == counts and got["xid_count"] == sum(counts.values())
    assert got["fallen_off_bus"] == []


def test_xid_text_and_line_are_kept():
    got = xid.parse(capture("xid-04-gpu-operator-syslog-xid48-64-dbe.txt"))
    first = got["xid_events"][0]
    assert first["line"] == 4 and first["text"].startswith(
        "pid='<unknown>', name=<unknown>, An uncorrectable double"
    )
    with pytest.raises(ParseError, match=r"^line 2: a NUL byte"):
        xid.parse("ok\nbad\x00line\n")


# ---------------------------------------------------------------- the command line


def run_parse(kind: str, path: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "suite", "parse", kind, str(path), "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_parse_command_cut_input_is_partial_exit_1_and_good_input_has_verdicts(tmp_path):
    """A -q cut short is judged on what it holds and said partial (exit 1, as a cut nccl-tests run), not
    refused."""
    cut = run_parse("smi-q", DATA / "nvsmi-q-15-h100-535-cut-at-line-91-edited.txt")
    assert cut.returncode == 1, cut.stderr
    data = json.loads(cut.stdout)
    assert (
        data["complete"] is False and "'Attached GPUs : 8' but the file holds 1 GPU block" in data["reason"]
    )
    # its one block stops before Temperature: kept, marked cut — a fault in it counts, a pass from it does not
    assert [g["cut"] for g in data["gpus"]] == [True]
    assert {v.status for v in smi_verdicts(data)} <= {"skip", "fail", "warn"}
    assert cut.stderr.count("\n") == 1 and "partial: " in cut.stderr and "--allow-partial" in cut.stderr
    assert "Traceback" not in cut.stderr
    good = run_parse("ibstat", DATA / "ibstat-02-h100-node-roce-port-down-polling.txt")
    assert good.returncode == 0, good.stderr
    data = json.loads(good.stdout)
    assert len(data["ports"]) == 12
    assert [(v["id"], v["status"]) for v in data["verdicts"]] == [("health.network", "fail")]
