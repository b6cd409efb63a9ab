"""The health stage's rules: pure functions from parsed tool outputs and per-GPU measurements to verdicts.

One verdict per check, naming every GPU/NIC it found wrong and what to do; `python -m suite parse smi-q`
adds `smi_verdicts` to its parse. The measured rule: a GPU is an outlier when it reaches < 90 % of the median
of its peers (the others), or < the expected fraction of its datasheet peak / of its PCIe link's rate.
"""

from __future__ import annotations

import re
import statistics
from typing import Any, Iterable

from suite.hardware.cuda_lines import driver_refusal, line_of_cuda
from suite.hardware.gpu_host_checks import fabric_problem_from_gpus, processes_problem_from_list
from suite.hardware.gpus import PCIE_X16_GBps
from suite.parsers.xid import APP_XIDS, action
from suite.results import Verdict
from suite.verdicts import verdicts_for

V = verdicts_for("health")
PEER_FRACTION = 0.90
"""A GPU below 90 % of its peers' median is slower than its twins: throttled, downtrained or faulty."""
CPU_PEER_FRACTION = 0.50
"""The same rule on CPU ranks (the rehearsal) at half the median: ranks on shared cores vary by up to ~2× with
whatever else runs, so a tighter mark would flag noise; an injected slow rank (4× the work) is still
caught."""
GEMM_PEAK_FRACTION = 0.50
"""A large bf16 GEMM reaches 60–80 % of the dense datasheet peak on a healthy H100/A100; below half is a
brake."""
COPY_LINK_FRACTION = 0.60
"""Pinned host↔device copies reach ~80 % of the PCIe link's per-direction rate; below 60 % the path is
wrong."""
BRAKES = ("HW Slowdown", "HW Thermal Slowdown", "HW Power Brake Slowdown", "SW Thermal Slowdown")
NEW_NODE = "ask the provider for another node"
RESET = "reset the GPU (`nvidia-smi -r -i N` with nothing running) or reboot"


def _name(g: dict[str, Any]) -> str:
    return f"GPU {g['index']} ({g['bus_id']})"


def _one(check: str, bad: list[str], *, expected: str, ok: str, fix: str, status: str = "fail") -> Verdict:
    if not bad:
        return V.passed(check, expected=expected, observed=ok, reason=ok)
    shown = "; ".join(bad[:4]) + (f"; and {len(bad) - 4} more" if len(bad) > 4 else "")
    return V.verdict(check, status, expected=expected, observed=shown, reason=f"{shown}: {fix}")


CONSUMER_BOARD = re.compile(r"\b(GeForce|RTX|TITAN|Quadro)\b", re.IGNORECASE)
"""Consumer and workstation cards: rented in boxes whose slots split x16 into x8/x8 or sit on risers, where a
narrower link is how the box was built, not a fault. The measured host link (health.measured) says whether it
costs what the renter needs."""


def pcie_verdict(gpus: list[dict[str, Any]], under_load: bool) -> Verdict:
    """Width below max is wrong at any time on a data-centre board, a warning on a consumer or workstation one
    (see CONSUMER_BOARD); a lower generation only under load (idle GPUs drop it to save power)."""
    bad, narrow = [], []
    for g in gpus:
        wc, wm, gc, gm = (
            g["link_width_current"],
            g["link_width_max"],
            g["pcie_gen_current"],
            g["pcie_gen_max"],
        )
        if wc and wm and wc < wm:
            (narrow if CONSUMER_BOARD.search(g.get("product_name") or "") else bad).append(
                f"{_name(g)} PCIe x{wc} of x{wm}"
            )
        elif gc and gm and gc < gm and (under_load or g.get("performance_state") == "P0"):
            bad.append(f"{_name(g)} PCIe Gen{gc} of Gen{gm} at {g.get('performance_state') or 'load'}")
    expected = "every GPU's PCIe link at its max generation (under load) and width"
    if narrow and not bad:
        return _one(
            "pcie_link",
            narrow,
            expected=expected,
            ok="",
            status="warn",
            fix="a consumer or workstation card on a narrower slot or a riser (x8/x8 boards are built so): "
            "fine where the measured host link (health.measured) holds; if it misses, ask for a box "
            "with full-width slots",
        )
    return _one(
        "pcie_link",
        bad + narrow,
        expected=expected,
        ok=f"{len(gpus)} GPU(s) at full PCIe width" + (" and generation under load" if under_load else ""),
        fix="a downtrained link (slot, riser or BIOS setting): " + NEW_NODE,
    )


def memory_verdicts(gpus: list[dict[str, Any]]) -> list[Verdict]:
    ecc, remap = [], []
    for g in gpus:
        unc = {k: v for k, v in g["ecc_nonzero"].items() if "Uncorrectable" in k or "Double Bit" in k}
        if unc:
            ecc.append(
                f"{_name(g)} uncorrectable ECC {', '.join(f'{k} {v}' for k, v in list(unc.items())[:2])}"
            )
        rows, pages = g["remapped_rows"], g["retired_pages"]
        if rows.get("Remapping Failure Occurred") == "Yes":
            remap.append(f"{_name(g)} row remapping failed")
        elif rows.get("Pending") == "Yes":
            remap.append(
                f"{_name(g)} row remap pending ({rows.get('Uncorrectable Error', '?')} uncorrectable rows)"
            )
        elif pages.get("Pending Page Blacklist") == "Yes" or pages.get("Pending") == "Yes":
            remap.append(f"{_name(g)} page retirement pending")
        if (g.get("reset_required") or "No") == "Yes":
            remap.append(f"{_name(g)} says Reset Required")
    return [
        _one(
            "ecc",
            ecc,
            expected="no uncorrectable ECC error (volatile or aggregate)",
            ok=f"no uncorrectable ECC error on {len(gpus)} GPU(s)",
            fix=f"{RESET}; if the count grows, {NEW_NODE}",
        ),
        _one(
            "remapped_rows",
            remap,
            expected="no pending row remap or page retirement, no remap failure",
            ok="no pending remap or retirement",
            fix=f"{RESET} to apply it; a remap failure means {NEW_NODE}",
        ),
    ]


def clocks_verdict(gpus: list[dict[str, Any]], under_load: bool) -> Verdict:
    bad = [
        f"{_name(g)} {', '.join(r for r in g['active_clock_reasons'] if r in BRAKES)}"
        for g in gpus
        if any(r in BRAKES for r in g["active_clock_reasons"])
    ]
    return _one(
        "clock_brakes",
        bad,
        expected="no HW slowdown, power brake or thermal slowdown active",
        ok="no clock brake active",
        status="fail" if under_load or any(b.split(") ", 1)[1].startswith("HW") for b in bad) else "warn",
        fix="the clocks are held down (HW power brake = the board's power supply signal, thermal = cooling): "
        + NEW_NODE,
    )


def settings_verdicts(gpus: list[dict[str, Any]]) -> list[Verdict]:
    power = [
        f"{_name(g)} limit {g['power_limit_w']:.0f} W of default {g['power_default_w']:.0f} W"
        for g in gpus
        if g["power_limit_w"] and g["power_default_w"] and g["power_limit_w"] < 0.95 * g["power_default_w"]
    ]
    mig = [_name(g) for g in gpus if (g.get("mig_mode_current") or "Disabled") == "Enabled"]
    compute = [f"{_name(g)} {g['compute_mode']}" for g in gpus if g.get("compute_mode") in ("Prohibited",)]
    persist = [_name(g) for g in gpus if g.get("persistence_mode") == "Disabled"]
    hot = [
        f"{_name(g)} {g['gpu_temp_c']:.0f} C (slowdown at {g['slowdown_temp_c']:.0f} C)"
        for g in gpus
        if g["gpu_temp_c"] is not None
        and g["slowdown_temp_c"]
        and g["gpu_temp_c"] >= g["slowdown_temp_c"] - 5
    ]
    hot += [
        f"{_name(g)} {g['tlimit_margin_c']:.0f} C below its T.Limit"
        for g in gpus
        if g.get("tlimit_margin_c") is not None and g["tlimit_margin_c"] <= 5
    ]
    return [
        _one(
            "power_limit",
            power,
            expected="power limit at its default",
            ok="power limits at their defaults",
            status="warn",
            fix="`nvidia-smi -pl <default>` (root) or ask the provider why it is capped",
        ),
        _one(
            "modes",
            mig + compute,
            expected="MIG off and compute mode not Prohibited: whole GPUs for the run",
            ok="MIG off, compute mode usable",
            fix="`nvidia-smi -mig 0` and a GPU reset, or ask for a node without MIG",
        ),
        _one(
            "persistence",
            persist,
            expected="persistence mode on",
            ok="persistence mode on",
            status="warn",
            fix="`nvidia-smi -pm 1` (each process otherwise pays the driver's start-up)",
        ),
        _one(
            "temperature",
            hot,
            expected="every GPU 5 C or more below its slowdown temperature",
            ok="temperatures below slowdown",
            status="warn",
            fix="cooling: ask the provider",
        ),
    ]


def smi_verdicts(
    parsed: dict[str, Any], *, under_load: bool = False, fabric_manager: str = ""
) -> list[Verdict]:
    """Every `nvidia-smi -q` check: PCIe, ECC, remaps, clocks, power, modes, fabric, processes."""
    gpus = parsed["gpus"]
    out = [
        pcie_verdict(gpus, under_load),
        *memory_verdicts(gpus),
        clocks_verdict(gpus, under_load),
        *settings_verdicts(gpus),
    ]
    fabric = fabric_problem_from_gpus(gpus, fabric_manager)
    out.append(
        V.check(
            "fabric",
            fabric is None,
            expected="NVSwitch fabric State Completed, Status Success",
            observed=fabric or "no fabric problem",
            reason_ok="fabric up (or no fabric on this board)",
            reason_bad=fabric or "",
        )
    )
    procs = processes_problem_from_list(parsed["processes"])
    out.append(
        V.check(
            "processes",
            procs is None,
            expected="no compute process on the GPUs before the run",
            observed=procs or "none",
            reason_ok="no other process holds the GPUs",
            reason_bad=procs or "",
        )
    )
    if not gpus:  # nothing checked is nothing passed (a -q cut before its first block)
        return [
            V.skip(
                v.id.split(".", 1)[1],
                expected=v.expected,
                observed="no GPU block read",
                reason="the `nvidia-smi -q` capture holds no GPU block: see health.nvidia_smi",
            )
            for v in out
        ]
    cut = [str(g.get("bus_id") or g.get("index")) for g in gpus if g.get("cut")]
    if cut:  # a fault a cut block shows stands; a pass may rest on the sections it lacks
        return [
            v
            if v.status != "pass"
            else V.skip(
                v.id.split(".", 1)[1],
                expected=v.expected,
                observed=f"{v.observed} (GPU {', '.join(cut)} cut)",
                reason="the `nvidia-smi -q` capture holds GPU block(s) cut short: what they hold passed, "
                "what "
                "they lack is undecided; see health.nvidia_smi",
            )
            for v in out
        ]
    return out


def driver_verdict(driver: str | None, torch_cuda: str | None) -> Verdict:
    """The driver must run the CUDA torch was built for (the same rule preflight applies before the image)."""
    expected = "a driver that runs the CUDA torch was built for"
    line = line_of_cuda(torch_cuda or "")
    if not driver or line is None:
        return V.skip(
            "driver",
            expected=expected,
            observed=f"driver {driver or '?'}, torch CUDA {torch_cuda or '?'}",
            reason="the driver version or torch's CUDA line is unknown: nothing to compare",
        )
    problem = driver_refusal(driver, line, how_to_choose="CUDA_LINE={name}")
    return V.check(
        "driver",
        problem is None,
        expected=expected,
        observed=f"driver {driver}, torch CUDA {torch_cuda}",
        reason_ok=f"driver {driver} runs CUDA {line.cuda}",
        reason_bad=problem or "",
    )


def kernel_log_verdict(parsed: dict[str, Any] | None, why_not: str = "") -> Verdict:
    """XIDs and fallen-off-bus lines since boot; an unreadable log is a skip with its reason, never a pass."""
    expected = "no NVIDIA XID error and no GPU fallen off the bus in the kernel log since boot"
    if parsed is None:
        return V.skip("kernel_log", expected=expected, observed="not read", reason=why_not)
    events = parsed["xid_events"]
    grave = [e for e in events if e["xid"] not in APP_XIDS or caused_by(e) not in (None, *APP_XIDS)]
    counts: dict[tuple[str, int], int] = {}
    for e in grave or events:
        counts[(e["bus"], e["xid"])] = counts.get((e["bus"], e["xid"]), 0) + 1
    shown = "; ".join(f"XID {x} ×{n} on {bus}" for (bus, x), n in list(counts.items())[:4])
    if len(counts) > 4:
        shown += f"; and {len(counts) - 4} more"
    if parsed["fallen_off_bus"]:
        return V.fail(
            "kernel_log",
            expected=expected,
            observed=f"fallen off the bus: {', '.join(parsed['fallen_off_bus'])}",
            reason=f"GPU {parsed['fallen_off_bus'][0]} fell off the bus: {action(79)}",
        )
    if grave:
        first = grave[0]
        code = first["xid"] if first["xid"] not in APP_XIDS else caused_by(first)
        return V.fail(
            "kernel_log",
            expected=expected,
            observed=shown,
            reason=f"{shown} (first at line {first['line']}): XID {code}: {action(code)}",
        )
    if events:
        return V.warn(
            "kernel_log", expected=expected, observed=shown, reason=f"{shown}: {action(events[0]['xid'])}"
        )
    window = f" ({parsed['window']}: XIDs after it are not seen)" if parsed.get("window") else ""
    return V.passed(
        "kernel_log",
        expected=expected,
        observed=f"{parsed['lines']} lines, no XID",
        reason=f"no XID since boot{window}",
    )


def caused_by(event: dict[str, Any]) -> int | None:
    """The earlier XID a program-level XID names ('… caused by previous Xid 149'), if any."""
    m = re.search(r"previous Xid (\d+)", event["text"])
    return int(m.group(1)) if m else None


def network_verdict(parsed: dict[str, Any] | None, why_not: str = "") -> Verdict:
    """A port down whose twins (same adapter type) are up fails; a slower twin or an ibstat error warns."""
    expected = "every InfiniBand/RoCE port of a kind Active, LinkUp, at its twins' rate"
    if parsed is None and why_not:
        return V.skip("network", expected=expected, observed="not read", reason=why_not)
    if parsed is None or not parsed["ports"]:
        return V.not_applicable(
            "network",
            expected=expected,
            observed="no port listed",
            why="no InfiniBand/RoCE device: nothing to check (a single-node run needs none)",
        )
    ports = parsed["ports"]
    up_types = {p["ca_type"] for p in ports if p["state"] == "Active"}
    best = {
        t: max((p["rate"] or 0) for p in ports if p["ca_type"] == t and p["state"] == "Active")
        for t in up_types
    }
    down = [
        f"{p['ca']} port {p['port']} {p['state']}/{p['physical_state'] or '?'}"
        for p in ports
        if p["state"] != "Active" and p["ca_type"] in up_types
    ]
    slow = [
        f"{p['ca']} at {p['rate']:g} Gb/s of {best[p['ca_type']]:g}"
        for p in ports
        if p["state"] == "Active" and p["rate"] and p["rate"] < best[p["ca_type"]]
    ]
    idle = [p for p in ports if p["state"] != "Active" and p["ca_type"] not in up_types]
    if down:
        return _one(
            "network",
            down,
            expected=expected,
            ok="",
            fix=f"a port of a working set is down (cable, switch "
            f"port or subnet manager): ask the provider to fix it, or for another node "
            f"({sum(p['state'] == 'Active' for p in ports)} of {len(ports)} ports up)",
        )
    trained = [
        f"{p['ca']} port {p['port']} {p['state']}/{p['physical_state']}"
        for p in idle
        if (p["physical_state"] or "").lower() == "linkup"
    ]
    problems = slow + trained + parsed.get("errors", [])
    if problems:  # a cable trained to a switch whose port stays down: paid for, unusable (no subnet manager?)
        return _one(
            "network",
            problems,
            expected=expected,
            ok="",
            status="warn",
            fix="a port trained slower than its twins, a port whose link is up but which is not Active (no "
            "subnet manager, or disabled: a run across nodes over it fails), or the tool stopped early: "
            "ask the provider",
        )
    note = f"; {len(idle)} port(s) of unused adapter types down" if idle else ""
    return V.passed(
        "network",
        expected=expected,
        observed=f"{len(ports) - len(idle)} port(s) Active{note}",
        reason=f"every used port up{note}",
    )


def dcgm_verdict(parsed: dict[str, Any] | None, why_not: str = "") -> Verdict:
    expected = "`dcgmi diag` overall Pass"
    if parsed is None:
        return V.skip("dcgm", expected=expected, observed="not run", reason=why_not)
    if parsed.get("runtime_error"):
        return V.skip(
            "dcgm",
            expected=expected,
            observed="dcgmi diag did not run its tests",
            reason=f"DCGM: {parsed['runtime_error']} (start nv-hostengine, or install DCGM matching the "
            f"driver)",
        )
    failed = [f"{name}: {result}" for name, result in parsed["tests"].items() if "Fail" in result]
    warned = [f"{name}: {result}" for name, result in parsed["tests"].items() if "Warn" in result]
    detail = (parsed["warnings"] or [""])[0]
    if failed:
        return _one(
            "dcgm",
            failed + ([detail] if detail else []),
            expected=expected,
            ok="",
            fix=f"DCGM's diagnostic failed on the GPU it names: {RESET} and rerun it; if it fails again, "
            + NEW_NODE,
        )
    if warned:
        return _one("dcgm", warned, expected=expected, ok="", status="warn", fix="read DCGM's warning above")
    if parsed.get("complete") is False:  # what it holds passed; the tests after the cut are unknown
        return V.skip(
            "dcgm",
            expected=expected,
            observed=f"{len(parsed['tests'])} tests Pass/Skip before the cut",
            reason=f"partial `dcgmi diag` output: {parsed.get('reason')}; capture the whole output",
        )
    return V.passed(
        "dcgm", expected=expected, observed=f"{len(parsed['tests'])} tests Pass/Skip", reason="DCGM passes"
    )


def outliers(values: dict[int, float], fraction: float = PEER_FRACTION) -> dict[int, tuple[float, float]]:
    """{gpu: (value, median of the others)} for every GPU below `fraction` × the median of its peers."""
    out = {}
    for gpu, value in values.items():
        peers = [v for g, v in values.items() if g != gpu]
        if peers:
            median = statistics.median(peers)
            if value < fraction * median:
                out[gpu] = (value, median)
    return out


def measured_verdicts(
    values: dict[str, dict[int, float]],
    *,
    on_gpu: bool,
    gemm_peak_tflops: float | None,
    link_GBps: dict[int, float],
    peak_source: str = "",
) -> list[Verdict]:
    """Per metric (gemm_tflops, h2d_GBps, d2h_GBps): the peer rule, and on GPUs the datasheet/link rule."""
    out = []
    for metric, per_gpu in values.items():
        if not per_gpu:
            continue
        unit = "TFLOP/s" if metric.startswith("gemm") else "GB/s"
        fraction = PEER_FRACTION if on_gpu else CPU_PEER_FRACTION
        slow = outliers(per_gpu, fraction)
        bad = [
            f"GPU {g} {v:.3g} {unit} < {fraction:.0%} of its peers' median {m:.3g}"
            for g, (v, m) in slow.items()
        ]
        floor_of = {}
        if on_gpu and metric.startswith("gemm") and gemm_peak_tflops:
            floor_of = {g: GEMM_PEAK_FRACTION * gemm_peak_tflops for g in per_gpu}
            why_floor = (
                f"{GEMM_PEAK_FRACTION:.0%} of the {gemm_peak_tflops:g} TFLOP/s bf16 dense peak "
                f"({peak_source})"
            )
        elif on_gpu and not metric.startswith("gemm"):
            floor_of = {g: COPY_LINK_FRACTION * link_GBps[g] for g in per_gpu if g in link_GBps}
            why_floor = f"{COPY_LINK_FRACTION:.0%} of the GPU's PCIe link rate (generation × width)"
        bad += [
            f"GPU {g} {v:.3g} {unit} < {floor_of[g]:.3g} ({why_floor})"
            for g, v in per_gpu.items()
            if g in floor_of and v < floor_of[g] and g not in slow
        ]
        expected = f"every {'GPU' if on_gpu else 'rank'} ≥ {fraction:.0%} of its peers' median" + (
            " and ≥ the expected fraction of its peak" if on_gpu else ""
        )
        observed_all = ", ".join(f"{g}: {v:.3g}" for g, v in sorted(per_gpu.items()))
        if on_gpu:
            out.append(
                _one(
                    f"measured.{metric}",
                    bad,
                    expected=expected,
                    ok=f"{unit} per GPU {observed_all}",
                    fix="this GPU is slower than it should be (clocks braked, link downtrained, or faulty): "
                    f"{RESET}; if it stays slow, {NEW_NODE}",
                )
            )
        else:  # the GPU's rule run on CPU ranks, shown as a skip: ranks sharing cores with whatever else runs
            # read slow when the machine is busy, so a slow rank there says how loaded the machine is (with
            # four busy loops on two cores one rank read a third of its peers), not how healthy a device is
            slow_ranks = "; ".join(b.replace("GPU", "rank") for b in bad) or "no rank below it"
            out.append(
                V.skip(
                    f"measured.{metric}",
                    expected=expected,
                    observed=f"{unit} per rank {observed_all}",
                    reason=f"the outlier rule on CPU ranks: {slow_ranks} — CPU ranks share cores with "
                    f"the rest of the machine, so this measures its load, not a device: judged on "
                    f"GPUs only",
                )
            )
    return out


def usable_gpus(parsed: dict[str, Any] | None, kernel_log: dict[str, Any] | None) -> list[int]:
    """GPUs with nothing that stops a run: no pending remap/reset, MIG off, not fallen off the bus."""
    if parsed is None:
        return []
    gone = set(kernel_log["fallen_off_bus"]) if kernel_log else set()
    out = []
    for g in parsed["gpus"]:
        bus = g["bus_id"].lower()[-12:-2]  # 00000000:B3:00.0 → 0000:b3:00, as the kernel log names it
        blocked = (
            g["remapped_rows"].get("Pending") == "Yes"
            or (g.get("reset_required") or "No") == "Yes"
            or (g.get("mig_mode_current") or "Disabled") == "Enabled"
            or bus in gone
        )
        if not blocked:
            out.append(g["index"])
    return out


def link_rate_GBps(gpus: Iterable[dict[str, Any]]) -> dict[int, float]:
    """Per GPU index, its PCIe link's per-direction rate at its max generation and current width."""
    out = {}
    for g in gpus:
        per_x16 = PCIE_X16_GBps.get(g["pcie_gen_max"] or 0)
        if per_x16 and g["link_width_current"]:
            out[g["index"]] = per_x16 * g["link_width_current"] / 16
    return out
