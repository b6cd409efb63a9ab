"""`nvidia-smi -q` → what the health stage judges, per GPU: PCIe link now vs max, ECC mode and counts, retired
pages and remapped rows, clock-event reasons, persistence/compute/MIG mode, temperature, power limit vs
default, reset status, fabric state and the processes on the GPU.

The tree is read by suite/parsers/smi_query.py (`parse_blocks`); this module only names the paths. Drivers
spell some sections two ways, both read: `Clocks Event Reasons` (R535+) / `Clocks Throttle Reasons` (older),
`GPU Power Readings` + `Current Power Limit` (R530+) / `Power Readings` + `Power Limit`. A value of `N/A`
(a consumer card without ECC, a pre-Ampere GPU without row remapping) reads as absent, never as zero.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from suite.parsers import ParseError
from suite.parsers.smi_query import CUDA_KEYS, DRIVER_KEYS, SmiGpu, _int, parse_blocks

CLOCK_REASON_SECTIONS = ("Clocks Event Reasons", "Clocks Throttle Reasons")
POWER_SECTIONS = ("GPU Power Readings", "Power Readings")
_NUMBER = re.compile(r"\s*(-?\d+(?:\.\d+)?)")


def _float(value: str | None) -> float | None:
    m = _NUMBER.match(value or "")
    return float(m.group(1)) if m else None


def _children(gpu: SmiGpu, section: str, *, direct: bool) -> dict[str, str]:
    """The `Key : value` pairs under `section/` (only its own keys when direct, else every depth, path
    kept)."""
    prefix = section + "/"
    out = {}
    for path, value in gpu.fields.items():
        if path.startswith(prefix):
            rest = path[len(prefix) :]
            if not direct or "/" not in rest:
                out[rest] = value
    return out


def _count(value: str) -> int | None:
    m = re.fullmatch(r"\s*(\d+)\s*", value)
    return int(m.group(1)) if m else None


def _first(gpu: SmiGpu, *paths: str) -> str | None:
    return next((gpu.get(p) for p in paths if gpu.get(p) is not None), None)


def gpu_health(gpu: SmiGpu, index: int) -> dict[str, Any]:
    """One GPU block → the health rows' fields (the raw strings where a rule needs the tool's own words)."""
    ecc = _children(gpu, "ECC Errors", direct=False)
    section = next((s for s in CLOCK_REASON_SECTIONS if _children(gpu, s, direct=False)), None)
    reasons = _children(gpu, section, direct=False) if section else {}
    power = next((s for s in POWER_SECTIONS if _children(gpu, s, direct=True)), POWER_SECTIONS[0])
    return {
        "index": index,
        **gpu.summary(),  # bus id, name, PCIe generation and width (current and max), fabric state and status
        "pcie_replays": _int(gpu.get("PCI/Replays Since Reset")),
        "performance_state": gpu.get("Performance State"),
        "persistence_mode": gpu.get("Persistence Mode"),
        "compute_mode": gpu.get("Compute Mode"),
        "mig_mode_current": gpu.get("MIG Mode/Current"),
        "ecc_mode_current": gpu.fields.get("ECC Mode/Current"),
        "ecc_errors": ecc,
        "ecc_nonzero": {k: int(v) for k, v in ecc.items() if (_count(v) or 0) > 0},
        "retired_pages": _children(gpu, "Retired Pages", direct=True),
        "remapped_rows": _children(gpu, "Remapped Rows", direct=True),
        "clock_reasons_section": section,
        "active_clock_reasons": [k.rsplit("/", 1)[-1] for k, v in reasons.items() if v == "Active"],
        "gpu_temp_c": _float(gpu.get("Temperature/GPU Current Temp")),
        "slowdown_temp_c": _float(gpu.get("Temperature/GPU Slowdown Temp")),
        # R550+: degrees left below the limit
        "tlimit_margin_c": _float(gpu.get("Temperature/GPU T.Limit Temp")),
        "power_draw_w": _float(_first(gpu, f"{power}/Power Draw", f"{power}/Instantaneous Power Draw")),
        "power_limit_w": _float(
            _first(
                gpu, f"{power}/Current Power Limit", f"{power}/Power Limit", f"{power}/Enforced Power Limit"
            )
        ),
        "power_default_w": _float(gpu.get(f"{power}/Default Power Limit")),
        "reset_required": gpu.get("GPU Reset Status/Reset Required"),
    }


def gpu_processes(text: str) -> list[dict[str, str]]:
    """Processes `nvidia-smi -q` lists under each GPU: [{gpu, pid, type, name, memory}] (gpu = its bus id).

    A process's keys are the lines below its `Process ID`, indented deeper; the next GPU block's `Bridge
    Chip/Type` comes after the next block's header, which ends the process: it cannot overwrite the last
    process's type.
    """
    out: list[dict[str, str]] = []
    gpu = None
    current: dict[str, str] | None = None
    indent = -1
    for line in text.splitlines():
        m = re.match(r"GPU ([0-9A-Fa-f:.]+)\s*$", line)
        if m:
            gpu, current = m.group(1), None
            continue
        kv = re.match(r"(\s+)(Process ID|Type|Name|Used GPU Memory)\s*:\s*(.*)$", line)
        if not kv or gpu is None:
            continue
        spaces, key, value = kv.groups()
        if key == "Process ID":
            current, indent = {"gpu": gpu, "pid": value.strip()}, len(spaces)
            out.append(current)
        elif current is not None and len(spaces) > indent:
            current[{"Type": "type", "Name": "name", "Used GPU Memory": "memory"}[key]] = value.strip()
    return out


ALWAYS_PRINTED = ("PCI", "Temperature", "Processes")
"""Sections `nvidia-smi -q` prints in every GPU block, on every driver (with N/A values where a card has
none): a block without one was cut there, and the checks that read what follows (ECC, temperature) would pass
on absence."""


def parse(text: str, *, partial_ok: bool = False) -> dict[str, Any]:
    """`nvidia-smi -q` → {driver_version, cuda_version, attached_gpus, gpus: [gpu_health], processes,
    complete, reason}.

    A capture cut short (fewer GPU blocks than `Attached GPUs`, a block that stops before one of
    ALWAYS_PRINTED) raises ParseError naming the line, unless partial_ok: then every block is returned, a cut
    one marked `cut` (its missing sections would read as clean: a pass from it is no pass), and complete is
    False with the reason. Output that is not `-q` at all always raises.
    """
    top, gpus, starts = parse_blocks(text)
    lines = text.splitlines()
    driver = next((top[k] for k in DRIVER_KEYS if k in top), None)
    if driver is None and not gpus:
        raise ParseError(
            "line 1: no 'Driver Version' line and no 'GPU <bus id>' block: this is not `nvidia-smi -q` output"
        )
    attached = _int(top.get("Attached GPUs"))
    problems: list[str] = []
    whole: list[SmiGpu] = []
    for gpu, start in zip(gpus, starts):
        missing = (
            "Product Name"
            if gpu.get("Product Name") is None
            else next((f"{s} section" for s in ALWAYS_PRINTED if not _has_section(gpu, s)), None)
        )
        if missing:
            problems.append(
                f"line {start}: the block of GPU {gpu.bus_id} has no {missing}: the output is garbled "
                "or cut short; capture `nvidia-smi -q` again, whole"
            )
        else:
            whole.append(gpu)
    if attached is not None and len(gpus) < attached:
        problems.insert(
            0,
            f"line {len(lines)}: 'Attached GPUs : {attached}' but the file holds {len(gpus)} GPU "
            "block(s): the output was cut short (or is one GPU's `-q -i`); capture `nvidia-smi -q` "
            "again, whole",
        )
    if problems and not partial_ok:
        raise ParseError(problems[0])
    return {
        "driver_version": driver,
        "cuda_version": next((top[k] for k in CUDA_KEYS if top.get(k) not in (None, "", "N/A")), None),
        "attached_gpus": attached,
        # A cut block is kept, marked: a fault it shows (a remap pending) counts; what it lacks is undecided.
        "gpus": [
            gpu_health(g, i) if g in whole else {**gpu_health(g, i), "cut": True} for i, g in enumerate(gpus)
        ],
        "processes": gpu_processes(text),
        "complete": not problems,
        "reason": "; ".join(problems),
    }


def _has_section(gpu: SmiGpu, section: str) -> bool:
    """The section's header was read: children under it, or its own value (`Processes : None`)."""
    return gpu.get(section) is not None or bool(_children(gpu, section, direct=False))


def parse_file(path: Path | str) -> dict[str, Any]:
    """`python -m suite parse smi-q FILE --json`: a cut capture parses as far as it is whole (complete:
    false)."""
    return parse(Path(path).read_text(encoding="utf-8"), partial_ok=True)
