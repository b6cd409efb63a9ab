"""What a GPU did over time: `nvidia-smi --query-gpu=… --format=csv [-lms N]` samples and `-q -d PERFORMANCE`.

    parse_query_csv(text)    # → [{"index": 0, "t": 0.0, "power.draw": 698.4, "clocks.sm": 1980.0, …,
                             # "reasons": 0x0}]
    parse_performance(text)  # → [{"index": 0, "bus_id": "00000000:18:00.0", "reasons": {"HW Slowdown": True,
                             # …}}]
    named_reasons(mask)      # 0x84 → ["SW Power Cap", "HW Power Brake Slowdown"]

The CSV's header names each column with its unit in brackets (`power.draw [W]`, `clocks.current.sm [MHz]`, the
long form nvidia-smi prints for `clocks.sm`); values carry the unit too (`83.92 W`, `1320 MHz`), `[N/A]` /
`N/A` / `[Not Supported]` read as absent. A looped query (`-lms`, `-l`) prints the header once and then one
line per GPU per period; a header line repeated (two captures concatenated) is skipped. Throttle reasons come
either as the `clocks_throttle_reasons.active` bitmask (hex, nvml.h's bits below) or as one `Active` / `Not
Active` column per reason (`clocks_throttle_reasons.hw_slowdown`; `clocks_event_reasons.*` on R535+); both are
read into one mask. `-q -d PERFORMANCE` is the `-q` tree's clock reasons section alone, read by
suite/parsers/smi_query.py.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from suite.parsers import ParseError
from suite.parsers.smi_health import CLOCK_REASON_SECTIONS
from suite.parsers.smi_query import parse_blocks

REASON_BITS = {
    "GPU Idle": 0x1,
    "Applications Clocks Setting": 0x2,
    "SW Power Cap": 0x4,
    "HW Slowdown": 0x8,
    "Sync Boost": 0x10,
    "SW Thermal Slowdown": 0x20,
    "HW Thermal Slowdown": 0x40,
    "HW Power Brake Slowdown": 0x80,
    "Display Clock Setting": 0x100,
}
"""nvml.h's nvmlClocksEventReason* / nvmlClocksThrottleReason* bits (the same values under both names)."""
SECTION_NAMES = {"Idle": "GPU Idle"}
"""`-q` spells one reason differently from nvml.h ("Idle" for GpuIdle)."""
CSV_REASONS = {
    "gpu_idle": "GPU Idle",
    "applications_clocks_setting": "Applications Clocks Setting",
    "sw_power_cap": "SW Power Cap",
    "hw_slowdown": "HW Slowdown",
    "sync_boost": "Sync Boost",
    "sw_thermal_slowdown": "SW Thermal Slowdown",
    "hw_thermal_slowdown": "HW Thermal Slowdown",
    "hw_power_brake_slowdown": "HW Power Brake Slowdown",
    "display_clock_setting": "Display Clock Setting",
}
ALIASES = {
    "clocks.current.sm": "clocks.sm",
    "clocks.current.memory": "clocks.mem",
    "clocks.current.graphics": "clocks.gr",
    "power.limit": "power.limit",
    "enforced.power.limit": "power.limit",
    "clocks_event_reasons.active": "clocks_throttle_reasons.active",
}
ABSENT = {"", "N/A", "[N/A]", "[Not Supported]", "Not Supported", "[Unknown Error]"}
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_TIMESTAMP_FORMATS = ("%Y/%m/%d %H:%M:%S.%f", "%Y/%m/%d %H:%M:%S")


def named_reasons(mask: int) -> list[str]:
    return [name for name, bit in REASON_BITS.items() if mask & bit]


def _column(header: str) -> str:
    name = header.split("[", 1)[0].strip()
    name = ALIASES.get(name, name)
    return name.replace("clocks_event_reasons.", "clocks_throttle_reasons.")


def _timestamp(value: str) -> float | None:
    for fmt in _TIMESTAMP_FORMATS:
        try:
            return datetime.strptime(value.strip(), fmt).timestamp()
        except ValueError:
            continue
    return None


def _value(column: str, raw: str) -> Any:
    raw = raw.strip()
    if raw in ABSENT:
        return None
    if column == "clocks_throttle_reasons.active" or column == "clocks_throttle_reasons.supported":
        return int(raw, 16)
    if column.startswith("clocks_throttle_reasons."):
        return raw == "Active"
    if column in ("name", "pci.bus_id", "uuid", "pstate"):
        return raw
    if column == "timestamp":
        return _timestamp(raw)
    found = _NUMBER.match(raw)
    return float(found.group(0)) if found else raw


def parse_query_csv(text: str) -> list[dict[str, Any]]:
    """The query's lines → one dict per GPU per sample: its columns by short name, `reasons` (a mask, or None
    when the query asked for no reason), `index` (the column, else the GPU's order within its sample), `t`
    (seconds since the first sample, from `timestamp`, else the sample's number)."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines or "," not in lines[0] and not lines[0].strip().isidentifier():
        raise ParseError(
            "line 1: no CSV header: capture with `nvidia-smi --query-gpu=… --format=csv` (with its header)"
        )
    header_line = lines[0]
    columns = [_column(h) for h in header_line.split(",")]
    if not any(
        c in ("power.draw", "clocks.sm", "temperature.gpu", "clocks_throttle_reasons.active")
        or c.startswith("clocks_throttle_reasons.")
        for c in columns
    ):
        raise ParseError(
            f"line 1: header {header_line.strip()!r} names no power, clock, temperature or throttle "
            "column: this is not the sampler's query"
        )
    samples: list[dict[str, Any]] = []
    seen_in_sample: dict[Any, int] = {}
    first_time: float | None = None
    sample_number = -1
    for number, line in enumerate(lines[1:], 2):
        if line.strip() == header_line.strip():
            continue
        cells = line.split(",")
        if len(cells) != len(columns):
            raise ParseError(
                f"line {number}: {len(cells)} cells under a header of {len(columns)}: the capture is cut "
                "or two queries were mixed; capture again"
            )
        row = {c: _value(c, v) for c, v in zip(columns, cells)}
        key = row.get("index", row.get("pci.bus_id"))
        # a GPU seen again opens the next sample
        if key is None or key in seen_in_sample or sample_number < 0:
            sample_number += 1
            seen_in_sample = {}
        seen_in_sample[key] = len(seen_in_sample)
        mask = row.get("clocks_throttle_reasons.active")
        flags = {
            CSV_REASONS[c.split(".", 1)[1]]: v
            for c, v in row.items()
            if c.startswith("clocks_throttle_reasons.") and c.split(".", 1)[1] in CSV_REASONS
        }
        if mask is None and flags and any(v is not None for v in flags.values()):
            mask = sum(REASON_BITS[name] for name, active in flags.items() if active)
        stamp = row.get("timestamp")
        if stamp is not None and first_time is None:
            first_time = stamp
        row["reasons"] = mask
        row["index"] = int(row["index"]) if isinstance(row.get("index"), float) else seen_in_sample[key]
        row["t"] = (
            round(stamp - first_time, 3)
            if stamp is not None and first_time is not None
            else float(sample_number)
        )
        samples.append(row)
    if not samples:
        raise ParseError(f"line {len(lines)}: a header and no sample: the query ran for less than one period")
    return samples


def parse_performance(text: str) -> list[dict[str, Any]]:
    """`nvidia-smi -q -d PERFORMANCE` (or all of `-q`) → per GPU its bus id and each clock reason Active or
    not."""
    _, gpus, _ = parse_blocks(text)
    out = []
    for index, gpu in enumerate(gpus):
        section = next(
            (s for s in CLOCK_REASON_SECTIONS if any(p.startswith(s + "/") for p in gpu.fields)), None
        )
        if section is None:
            continue
        reasons = {}
        for path, value in gpu.fields.items():
            if path.startswith(section + "/") and value.strip() in ("Active", "Not Active"):
                name = path.rsplit("/", 1)[-1]
                reasons[SECTION_NAMES.get(name, name)] = value.strip() == "Active"
        mask = sum(REASON_BITS[name] for name, active in reasons.items() if active and name in REASON_BITS)
        out.append({"index": index, "bus_id": gpu.bus_id, "reasons": reasons, "mask": mask})
    if not out:
        raise ParseError(
            "line 1: no GPU block with a 'Clocks Event Reasons' / 'Clocks Throttle Reasons' section: "
            "capture `nvidia-smi -q -d PERFORMANCE`"
        )
    return out
