"""The health stage's rules on real captures: each broken box fails with the GPU/NIC named and what to do;
the healthy ones pass. And the measured outlier rule on numbers, and the stage's judge() on its facts."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from suite.config import GLOO_CPU, NCCL_GPU
from suite.parsers import dcgm, ibstat, nvlink, smi_health, xid
from suite.results import Row
from suite.stages import health
from suite.stages.health import nvlink_rules, rules

DATA = Path(__file__).resolve().parents[1] / "data" / "health"


def smi(name):
    return smi_health.parse_file(DATA / name)


def by_id(verdicts):
    assert verdicts, "no verdicts"
    return {v.id: v for v in verdicts}


def test_healthy_h200_passes_every_smi_check():
    verdicts = rules.smi_verdicts(smi("nvsmi-q-08-h200-550-healthy.txt"))
    assert len(verdicts) == 10
    assert {v.id: v.status for v in verdicts if v.status != "pass"} == {}
    found = smi("nvsmi-q-08-h200-550-healthy.txt")
    assert found["gpus"][0]["tlimit_margin_c"] == 59.0  # 28 C now, 59 C of margin below the T.Limit
    found["gpus"][0]["tlimit_margin_c"] = 3.0
    hot = by_id(rules.smi_verdicts(found))["health.temperature"]
    assert hot.status == "warn" and "GPU 0 (00000000:03:00.0) 3 C below its T.Limit" in hot.reason


def test_a_consumer_card_at_x4_of_x8_warns_and_a_data_centre_card_fails_naming_the_gpu_and_its_bus():
    """2× RTX 4060 Ti, one at x4 of x8 (a consumer board's split slot or a riser: how such boxes are built)
    warns, pointing at the measured host link; the same narrow link on a data-centre card fails."""
    found = smi("nvsmi-q-10-rtx4060ti-x2-one-at-x4-of-x8-550.txt")
    v = by_id(rules.smi_verdicts(found))["health.pcie_link"]
    assert v.status == "warn" and "health.measured" in v.reason
    assert "GPU 0 (00000000:03:00.0) PCIe x4 of x8" in v.reason and "09:00.0" not in v.reason
    found["gpus"][0]["product_name"] = "NVIDIA L40S"
    v = by_id(rules.smi_verdicts(found))["health.pcie_link"]
    assert v.status == "fail" and "ask the provider for another node" in v.reason


def test_idle_gen1_is_not_a_fault_but_gen1_under_load_is():
    idle = smi("nvsmi-q-13-rtx4090x8-535-idle-gen1.txt")
    assert rules.pcie_verdict(idle["gpus"], under_load=False).status == "pass"
    loaded = rules.pcie_verdict(idle["gpus"], under_load=True)
    # four named, then "and 4 more"
    assert loaded.status == "fail" and "GPU 7 (00000000:E1:00.0)" not in loaded.reason
    assert "GPU 0 (00000000:01:00.0) PCIe Gen1 of Gen4" in loaded.reason and "and 4 more" in loaded.reason


def test_pending_row_remap_fails_with_reset():
    found = smi("nvsmi-q-02-a10-remapped-rows-pending-535.txt")
    v = by_id(rules.smi_verdicts(found))
    assert v["health.remapped_rows"].status == "fail"
    assert "row remap pending (4 uncorrectable rows)" in v["health.remapped_rows"].reason
    assert "nvidia-smi -r" in v["health.remapped_rows"].reason
    assert v["health.ecc"].status == "pass"  # the ECC counters themselves are 0
    assert rules.usable_gpus(found, None) == []
    assert rules.usable_gpus(smi("nvsmi-q-08-h200-550-healthy.txt"), None) == [0]


def test_power_brake_fails_on_all_eight_h100s():
    v = by_id(rules.smi_verdicts(smi("nvsmi-q-11-h100x8-535-hw-power-brake-active.txt")))[
        "health.clock_brakes"
    ]
    assert v.status == "fail" and "HW Power Brake Slowdown" in v.reason and "and 4 more" in v.reason


def test_other_tenants_processes_fail_desktop_graphics_do_not():
    v = by_id(rules.smi_verdicts(smi("nvsmi-q-12-rtx4090x8-535-compute-processes.txt")))["health.processes"]
    assert v.status == "fail" and v.reason.startswith(
        "7 process(es) already use the GPUs: pid 58130 /usr/bin/python"
    )
    titan = by_id(rules.smi_verdicts(smi("nvsmi-q-14-titanv-560-desktop-processes.txt")))
    assert titan["health.processes"].status == "pass" and titan["health.persistence"].status == "warn"


@pytest.mark.parametrize(
    "name, status, words",
    [
        ("xid-01-h100-xe9680-xid119-gsp-timeout.txt", "fail", ["XID 119 ×5 on 0000:9b:00", "reset the GPU"]),
        ("xid-02-dmesg-iso-xid13-xid43.txt", "warn", ["XID 13 ×629", "the program's fault"]),
        (
            "xid-03-h100-akash-dmesg-T-xid43-31-94.txt",
            "fail",
            ["XID 94 ×1 on 0000:00:08", "contained ECC error"],
        ),
        (
            "xid-04-gpu-operator-syslog-xid48-64-dbe.txt",
            "fail",
            ["XID 48 ×1 on 0000:07:00", "uncorrectable ECC"],
        ),
        ("xid-05-journalctl-k-xid45-after-149-145.txt", "fail", ["XID 149", "restart the fabric manager"]),
    ],
)
def test_kernel_log_verdicts(name, status, words):
    v = rules.kernel_log_verdict(xid.parse_file(DATA / name))
    assert v.status == status and all(w in v.reason for w in words), v.reason


def test_an_unreadable_kernel_log_is_a_skip_with_the_reason_and_a_clean_one_passes():
    v = rules.kernel_log_verdict(None, "kernel log not readable (dmesg: exit 1: Operation not permitted)")
    assert v.status == "skip" and "Operation not permitted" in v.reason
    assert rules.kernel_log_verdict(xid.parse("[    0.000000] Linux version 6.8\n")).status == "pass"
    # the older one-line form
    gone = xid.parse("[   49.261458] NVRM: GPU at 0000:01:00.0 has fallen off the bus.\n")
    assert gone["fallen_off_bus"] == ["0000:01:00"]
    assert rules.kernel_log_verdict(gone).status == "fail"


def test_fallen_off_the_bus_over_three_lines_without_an_xid_fails():
    found = xid.parse_file(DATA / "xid-06-dmesg-fallen-off-bus-multiline-570.txt")
    assert found["xid_count"] == 0 and found["fallen_off_bus"] == ["0000:b3:00"]
    v = rules.kernel_log_verdict(found)
    assert v.status == "fail" and "GPU 0000:b3:00 fell off the bus" in v.reason and "another node" in v.reason
    h200 = smi("nvsmi-q-08-h200-550-healthy.txt")
    h200["gpus"][0]["bus_id"] = "00000000:B3:00.0"
    assert rules.usable_gpus(h200, found) == [] and rules.usable_gpus(h200, xid.parse("")) == [0]


@pytest.mark.parametrize(
    "name, status, words",
    [
        (
            "ibstat-02-h100-node-roce-port-down-polling.txt",
            "fail",
            ["mlx5_11 port 1 Down/Polling", "10 of 12 ports up"],
        ),
        ("ibstat-03-h100-node-all-active.txt", "pass", ["every used port up"]),
        ("ibstat-04-a100-8hca-ibpanic-mlx5_8.txt", "warn", ["stat of IB device 'mlx5_8' failed"]),
        ("ibv-devinfo-01-deepep-cx6dx-port-down.txt", "pass", ["1 port(s) of unused adapter types down"]),
        ("ibv-devinfo-03-deepep55-ib-active.txt", "pass", ["every used port up"]),
    ],
)
def test_network_verdicts(name, status, words):
    v = rules.network_verdict(ibstat.parse_file(DATA / name))
    assert v.status == status and all(w in v.reason for w in words), v.reason


def test_nvlink_and_dcgm_verdicts():
    links = nvlink.parse_file(DATA / "nvlink-s-01-a100x8-sxm4-12links-25gbs.txt")
    assert nvlink_rules.nvlink_verdict(links).status == "pass"
    links["gpus"][3]["links"][7], links["gpus"][3]["speeds_GBps"][7] = "<inactive>", None  # one link off
    off = nvlink_rules.nvlink_verdict(links)
    assert (
        off.status == "fail"
        and "GPU 3 link 7 <inactive>" in off.reason
        and "nvidia-fabricmanager" in off.reason
    )
    v = rules.dcgm_verdict(
        dcgm.parse_file(DATA / "dcgmi-diag-03-a10g-4gpu-dcgm339-r3-targeted-power-fail.txt")
    )
    assert v.status == "fail" and "Targeted Power: Pass - GPUs: 0, 2, 3 | Fail - GPU: 1" in v.reason
    assert rules.dcgm_verdict(None, "dcgmi not installed").status == "skip"


def test_outliers_are_below_ninety_percent_of_their_peers_median():
    assert rules.outliers({0: 100.0, 1: 98.0, 2: 101.0, 3: 99.0}) == {}
    assert rules.outliers({0: 100.0, 1: 98.0, 2: 60.0, 3: 99.0}) == {2: (60.0, 99.0)}


def test_measured_verdicts_on_gpus_name_the_slow_gpu_and_the_floor():
    gemm = {i: 700.0 for i in range(8)} | {5: 600.0}
    copies = {i: 50.0 for i in range(8)} | {2: 20.0}
    v = by_id(
        rules.measured_verdicts(
            {"gemm_tflops": gemm, "h2d_GBps": copies},
            on_gpu=True,
            gemm_peak_tflops=989.4,
            link_GBps={i: 63.0 for i in range(8)},
        )
    )
    assert v["health.measured.gemm_tflops"].status == "fail"
    assert v["health.measured.gemm_tflops"].reason.startswith(
        "GPU 5 600 TFLOP/s < 90% of its peers' median 700"
    )
    assert "GPU 2 20 GB/s < 90%" in v["health.measured.h2d_GBps"].reason
    slow_all = rules.measured_verdicts(
        {"gemm_tflops": {i: 300.0 for i in range(8)}}, on_gpu=True, gemm_peak_tflops=989.4, link_GBps={}
    )
    assert (
        slow_all[0].status == "fail"
        and "< 495 (50% of the 989.4 TFLOP/s bf16 dense peak" in slow_all[0].reason
    )


def test_judge_on_cpu_skips_gpu_checks_and_runs_the_outlier_rule():
    rows = [
        Row(stage="health", case="gemm", metric="gemm_tflops", value=v, unit="TFLOP/s", rank=r, text="cpu")
        for r, v in enumerate([1.0, 1.0, 0.2, 1.0])
    ]
    facts = {
        "profile": GLOO_CPU.to_dict(),
        "health": {
            "kernel_log": None,
            "kernel_log_why": "not readable: x",
            "network": None,
            "network_why": "",
        },
    }
    v = by_id(health.judge(rows, [], facts))
    # the rule runs (it names the slow rank) but judges nothing on CPU ranks: their speed is the machine's
    # load
    assert (
        v["health.measured.gemm_tflops"].status == "skip"
        and "rank 2" in v["health.measured.gemm_tflops"].reason
    )
    quiet = [dataclasses.replace(r, value=1.0) for r in rows]
    assert by_id(health.judge(quiet, [], facts))["health.measured.gemm_tflops"].status == "skip"
    assert v["health.pcie_link"].status == "skip" and "gloo-cpu" in v["health.pcie_link"].reason
    assert v["health.kernel_log"].status == "skip"


def test_judge_on_gpus_uses_the_capture_taken_under_load():
    idle = smi("nvsmi-q-13-rtx4090x8-535-idle-gen1.txt")
    facts = {
        "profile": NCCL_GPU.to_dict(),
        "health": {
            "smi": idle,
            "smi_under_load": idle,
            "kernel_log": None,
            "kernel_log_why": "x",
            "network": None,
        },
    }
    v = by_id(health.judge([], [], facts))
    assert v["health.pcie_link"].status == "fail"  # Gen1 while the GEMMs ran is a downtrained link
    facts["health"].pop("smi_under_load")
    assert by_id(health.judge([], [], facts))["health.pcie_link"].status == "pass"
    facts["health"]["smi"] = None
    facts["health"]["smi_why"] = "nvidia-smi -q: nvidia-smi: not on PATH"
    broken = by_id(health.judge([], [], facts))
    assert (
        broken["health.nvidia_smi"].status == "fail" and "not on PATH" in broken["health.nvidia_smi"].reason
    )
    assert (
        broken["health.pcie_link"].status == "skip"
        and broken["health.pcie_link"].reason == "see health.nvidia_smi"
    )


def test_the_figure_draws_one_bar_per_gpu_and_colours_the_outlier_red():
    import pandas as pd
    from matplotlib.colors import to_hex

    from suite.results import rows_to_frame
    from suite.stages.health import figure

    rows = [
        Row(
            stage="health",
            case="gemm",
            metric="gemm_tflops",
            value=v,
            unit="TFLOP/s",
            rank=r,
            dtype="bfloat16",
        )
        for r, v in enumerate([700.0, 690.0, 400.0, 705.0])
    ]
    rows += [
        Row(stage="health", case="copy", metric=m, value=50.0, unit="GB/s", rank=r)
        for m in ("h2d_GBps", "d2h_GBps")
        for r in range(4)
    ]
    figs = figure.figures(rows_to_frame(rows), pd.DataFrame(), {"profile": NCCL_GPU.to_dict()})
    assert len(figs) == 1
    axes = figs[0].axes
    assert [a.get_title() for a in axes] == [
        "bfloat16 GEMM",
        "host → device (pinned)",
        "device → host (pinned)",
    ]
    bars = axes[0].patches
    assert len(bars) == 4 and [to_hex(b.get_facecolor()) for b in bars].count(to_hex("tab:red")) == 1
    assert to_hex(bars[2].get_facecolor()) == to_hex("tab:red")
    assert figure.figures(rows_to_frame([]), pd.DataFrame(), {}) == []


def test_a_failed_measurement_launch_is_a_fail_that_keeps_the_other_findings():
    rows = [
        Row(
            stage="health",
            case="launch",
            metric="launch_failed",
            value=1,
            unit="",
            text="torchrun exited 1 (command: torchrun …); log tail: CUDA error: unknown error",
        )
    ]
    facts = {
        "profile": NCCL_GPU.to_dict(),
        "health": {
            "smi": smi("nvsmi-q-02-a10-remapped-rows-pending-535.txt"),
            "kernel_log": None,
            "kernel_log_why": "x",
            "network": None,
        },
    }
    v = by_id(health.judge(rows, [], facts))
    assert (
        v["health.measured"].status == "fail" and "CUDA error: unknown error" in v["health.measured"].reason
    )
    assert v["health.remapped_rows"].status == "fail"  # the finding that says why is still there


def test_the_driver_must_run_torchs_cuda():
    from suite.hardware.cuda_lines import LINES

    newest = LINES[0]
    old = rules.driver_verdict("470.57.02", newest.cuda)
    assert old.status == "fail" and "470.57.02" in old.reason and newest.min_driver_text in old.reason
    assert rules.driver_verdict("999.1", newest.cuda).status == "pass"
    assert rules.driver_verdict(None, newest.cuda).status == "skip"


def test_usable_gpus_is_read_through_facts():
    from suite.facts import usable_gpus

    assert usable_gpus({"health": {"usable_gpus": 7}}) == 7
    assert usable_gpus({"health": {"usable_gpus": None}}) is None and usable_gpus({}) is None


def test_the_gpu_measurement_launch_keeps_the_users_environment(monkeypatch):
    """The per-GPU launch sets CUDA_DEVICE_ORDER on top of the environment, not instead of it (the workers
    once ran without PATH, HOME or the user's NCCL_* settings)."""
    seen = {}

    class Context:
        def say(self, text):
            pass

        def torchrun(self, module, args=(), *, tag="", env=None, **kwargs):
            seen.update(module=module, env=env)
            raise health.LaunchError("recorded, not launched")

    monkeypatch.setenv("NCCL_IB_HCA", "mlx5_0")
    rows = health._measure(NCCL_GPU, Context(), [], {"smi": {"gpus": [{}] * 8}})
    assert seen["module"] == "suite.workloads.health_run" and seen["env"]["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    assert seen["env"]["PATH"] == os.environ["PATH"] and seen["env"]["NCCL_IB_HCA"] == "mlx5_0"
    assert rows and rows[0].metric == "launch_failed"
