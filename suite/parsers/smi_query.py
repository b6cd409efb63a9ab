"""`nvidia-smi -q` and `nvidia-smi -L` → driver/CUDA versions, GPU names, PCIe link, fabric state.

`-q` is an indented tree of `Key : value` lines; a line without a colon opens a section
(`PCI`, `GPU Link Info`, `Fabric`). Each GPU's block starts at column 0 with `GPU <bus id>`.
Keys are read by their path, e.g. `PCI/GPU Link Info/PCIe Generation/Max`. Since driver R610
the banner says `KMD Version` / `CUDA UMD Version` where older drivers say `Driver Version` /
`CUDA Version`; both are read. Lines that are not part of the tree (a shim's log line printed
into the output) are skipped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from suite.parsers import ParseError

_GPU_BLOCK = re.compile(r"GPU ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])\s*$")
_KEY_VALUE = re.compile(r"(\s*)([A-Za-z][^:]*?)\s*:\s?(.*)$")
_LIST_LINE = re.compile(r"GPU (\d+): (.+?)(?: \(UUID: ([^)]+)\))?\s*$")

DRIVER_KEYS = ("Driver Version", "KMD Version")
CUDA_KEYS = ("CUDA Version", "CUDA UMD Version")


@dataclass
class SmiGpu:
    bus_id: str
    fields: dict[str, str] = field(default_factory=dict)
    """Every `Key : value` of the GPU's block by path: 'PCI/GPU Link Info/Link Width/Max' → '16x'."""

    def get(self, path: str) -> str | None:
        value = self.fields.get(path)
        return None if value in (None, "", "N/A") else value

    def summary(self) -> dict[str, Any]:
        return {
            "bus_id": self.bus_id,
            "product_name": self.get("Product Name"),
            "pcie_gen_max": _int(self.get("PCI/GPU Link Info/PCIe Generation/Max")),
            "pcie_gen_current": _int(self.get("PCI/GPU Link Info/PCIe Generation/Current")),
            "link_width_max": _int(self.get("PCI/GPU Link Info/Link Width/Max")),
            "link_width_current": _int(self.get("PCI/GPU Link Info/Link Width/Current")),
            "fabric_state": self.get("Fabric/State"),
            "fabric_status": self.get("Fabric/Status"),
        }


def _int(value: str | None) -> int | None:
    m = re.match(r"\s*(\d+)", value or "")
    return int(m.group(1)) if m else None


def parse_blocks(text: str) -> tuple[dict[str, str], list[SmiGpu], list[int]]:
    """`nvidia-smi -q` → (the banner's keys, one SmiGpu per `GPU <bus id>` block, each block's first line
    number)."""
    top: dict[str, str] = {}
    gpus: list[SmiGpu] = []
    starts: list[int] = []
    stack: list[tuple[int, str]] = []  # (indent, section name) inside the current GPU block
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.rstrip()
        if not line.strip() or line.lstrip().startswith("="):
            continue
        block = _GPU_BLOCK.fullmatch(line)
        if block:
            gpus.append(SmiGpu(bus_id=block.group(1)))
            starts.append(number)
            stack = []
            continue
        indent = len(line) - len(line.lstrip())
        kv = _KEY_VALUE.fullmatch(line)
        if not gpus or indent == 0:
            if kv and indent == 0:
                top.setdefault(kv.group(2).strip(), kv.group(3).strip())
            continue
        while stack and stack[-1][0] >= indent:
            stack.pop()
        if kv and kv.group(3).strip():
            path = "/".join([name for _, name in stack] + [kv.group(2).strip()])
            gpus[-1].fields.setdefault(path, kv.group(3).strip())
        else:
            name = kv.group(2).strip() if kv else line.strip()
            stack.append((indent, name))
    return top, gpus, starts


def parse_query(text: str) -> dict[str, Any]:
    """`nvidia-smi -q` → {driver_version, cuda_version, attached_gpus, gpus: [per-GPU summary]}."""
    top, gpus, _ = parse_blocks(text)
    driver = next((top[k] for k in DRIVER_KEYS if k in top), None)
    if driver is None and not gpus:
        raise ParseError(
            "no 'Driver Version' line and no 'GPU <bus id>' block: this is not `nvidia-smi -q` output"
        )
    attached = _int(top.get("Attached GPUs"))
    return {
        "driver_version": driver,
        "cuda_version": next((top[k] for k in CUDA_KEYS if k in top and top[k] not in ("", "N/A")), None),
        "attached_gpus": attached,
        "gpus": [g.summary() for g in gpus],
    }


def parse_list(text: str) -> list[dict[str, Any]]:
    """`nvidia-smi -L` → [{index, name, uuid}] for the GPUs (MIG device lines are skipped)."""
    out = []
    for line in text.splitlines():
        m = _LIST_LINE.fullmatch(line.strip())
        if m:
            out.append({"index": int(m.group(1)), "name": m.group(2).strip(), "uuid": m.group(3)})
    return out


# ---------------------------------------------------------------- sniffing (suite ingest)

KIND = "nvidia-smi -q"
LIST_KIND = "nvidia-smi -L"


def sniff(head: bytes) -> bool:
    """`nvidia-smi -q`: its banner, or a Driver Version line beside Attached GPUs."""
    text = head.decode("utf-8", "replace")
    return "NVSMI LOG" in text or ("Driver Version" in text and "Attached GPUs" in text)


def sniff_list(head: bytes) -> bool:
    """`nvidia-smi -L`: every non-empty line is `GPU n: NAME (UUID: …)`, a MIG line under one, or the
    command itself as a shell echoed it."""
    lines = [line.strip() for line in head.decode("utf-8", "replace").splitlines() if line.strip()]
    gpus = [line for line in lines if _LIST_LINE.fullmatch(line) and "UUID" in line]
    return bool(gpus) and all(
        _LIST_LINE.fullmatch(line) or line.startswith("MIG ") or "nvidia-smi" in line for line in lines
    )
