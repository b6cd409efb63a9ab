"""NVIDIA driver errors in the kernel log (`dmesg`, `dmesg -T`, `dmesg --time-format iso`, `journalctl -k`,
syslog): XID events, "fallen off the bus", and PCIe AER errors on a GPU's bus.

    NVRM: Xid (PCI:0000:9b:00): 119, pid=2024380, name=nvidia-smi, Timeout after 6s …

Each XID is kept with its bus, code and the driver's text. What a code means and what to do comes from
NVIDIA's XID catalogue (https://docs.nvidia.com/deploy/xid-errors/), summarised in XID_ACTIONS: codes a
program causes (13, 31, 43, 45) warn, codes that mean the GPU or its link needs attention fail.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

from suite.parsers import ParseError

_XID = re.compile(r"NVRM: Xid \(PCI:([0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2})(?:\.\d)?\): (\d+), ?(.*)$")
_OFF_BUS = re.compile(
    r"NVRM: (?:The NVIDIA GPU|GPU at) (?:PCI:)?([0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2})"
    r".*?(?:has )?fallen off the bus"
)
_GPU_NAMED = re.compile(r"NVRM: The NVIDIA GPU ([0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2})")

APP_XIDS = {
    13: "graphics engine exception (the program's fault, e.g. an out-of-range access)",
    31: "GPU memory page fault (the program's fault: an illegal address)",
    43: "a program's GPU channel was stopped (its own error)",
    45: "a program's channel was torn down (after another error or a killed process)",
}
"""Codes a program causes: a warning on a rented box (someone's job crashed), not a broken GPU."""

XID_ACTIONS = {
    48: "uncorrectable ECC error (DBE): reset the GPU (nvidia-smi -r) and ask the provider to check the card",
    63: "row remapping / page retirement recorded: reset the GPU so it takes effect",
    64: "row remapping / page retirement failed: ask the provider for another node",
    74: "NVLink error: reset the GPU; if it repeats, ask the provider for another node",
    79: "the GPU fell off the bus: ask the provider for another node (or a reboot/reseat)",
    92: "high single-bit ECC rate: ask the provider to check the card",
    94: "contained ECC error: reset the GPU (the running program was stopped)",
    95: "uncontained ECC error: reset the GPU and ask the provider to check the card",
    109: "context switch timeout: reset the GPU if it repeats",
    119: "GSP firmware timeout: reset the GPU (nvidia-smi -r); if it repeats, ask for another node",
    120: "GSP firmware error: reset the GPU; if it repeats, ask for another node",
    140: "unrecovered ECC error: reset the GPU and ask the provider to check the card",
    145: "NVLink error (Blackwell): reset the GPU; if it repeats, ask the provider for another node",
    149: "NVLink/NVSwitch error: reset the GPU and restart the fabric manager; ask for another node if it "
    "repeats",
    154: "the driver asks for a GPU reset or reboot: reset the GPU (nvidia-smi -r) or reboot",
}
DEFAULT_ACTION = (
    "look the code up at https://docs.nvidia.com/deploy/xid-errors/ and reset the GPU if it repeats"
)


_LOG_LINE = re.compile(
    r"^\s*(?:\[\s*[\d.]+\]|\[[A-Z][a-z]{2} [^\]]*\d{4}\]|\w+\s*:\s*\w+\s*: |"
    r"(?:[A-Z][a-z]{2}\s+\d+\s+[\d:]+|\d{4}-\d\d-\d\dT\S+)\s+\S+\s+kernel:|kernel: |NVRM: )"
)
"""A line as dmesg (`[ 12.3]`, `-T`'s `[Sun Feb 23 … 2025]`, `--time-format iso`'s `kern  :warn  : `), syslog
                                                                                                 or
journalctl (`Dec  2 11:38:27 host kernel:`, `kernel: `) print it, or a bare `NVRM:` line (dmesg -t)."""

KIND = "kernel log"


def sniff(head: bytes) -> bool:
    """A kernel log with the NVIDIA driver's lines in it (`dmesg`, `journalctl -k`, syslog); a log without any
    says nothing about the GPUs and is left to the other kinds."""
    return b"NVRM: " in head and b"\x00" not in head


def parse(text: str) -> dict[str, Any]:
    """A kernel log → {xid_events: [{line, bus, xid, text}], xid_count, xid_counts: {'bus code': n},
    fallen_off_bus: [bus], aer: [{line, text}], lines}. A log with no NVIDIA line is a valid, clean log."""
    if "\x00" in text:
        line = text[: text.index("\x00")].count("\n") + 1
        raise ParseError(f"line {line}: a NUL byte: this is not a text kernel log")
    if text.strip() and not any(_LOG_LINE.match(line) for line in text.splitlines()):
        raise ParseError(
            "line 1: no kernel log line in it (`[  12.345678] …`, `kern  :info  : …`, `… kernel: …`): "
            "not `dmesg`/`journalctl -k` output — a text that quotes driver lines says nothing of a box"
        )
    events, off_bus, aer = [], [], []
    lines = text.splitlines()
    named: tuple[int, str] | None = (
        None  # R570+ splits "The NVIDIA GPU <bus> … has fallen off the bus" over 3 lines
    )
    for number, line in enumerate(lines, 1):
        m = _XID.search(line)
        if m:
            events.append(
                {"line": number, "bus": m.group(1).lower(), "xid": int(m.group(2)), "text": m.group(3)}
            )
            continue
        off = _OFF_BUS.search(line)
        start = _GPU_NAMED.search(line)
        if off:
            off_bus.append(off.group(1).lower())
        elif start:
            named = (number, start.group(1).lower())
        elif named and number - named[0] <= 3 and "fallen off the bus" in line:
            off_bus.append(named[1])
            named = None
        elif "AER:" in line and ("error" in line.lower()):
            aer.append({"line": number, "text": line.split("AER:", 1)[1].strip()})
    counts = Counter(f"{e['bus']} {e['xid']}" for e in events)
    return {
        "xid_events": events,
        "xid_count": len(events),
        "xid_counts": dict(counts),
        "fallen_off_bus": sorted(set(off_bus)),
        "aer": aer,
        "lines": len(lines),
    }


def action(xid: int) -> str:
    if xid in APP_XIDS:
        return f"{APP_XIDS[xid]}: nothing to do unless it repeats with no program of yours running"
    return XID_ACTIONS.get(xid, DEFAULT_ACTION)


def parse_file(path: Path | str) -> dict[str, Any]:
    return parse(Path(path).read_text(encoding="utf-8"))
