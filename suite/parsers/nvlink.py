"""`nvidia-smi nvlink -s` (link speeds) and `nvidia-smi nvlink -e` (error counters) → per GPU, per link.

    GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-5269b708-…)
             Link 0: 25 GB/s                    ← -s; a link that trained down or is off says <inactive>
             Link 0: Replay Errors: 0           ← -e; one counter per line

A card without NVLink prints nothing (or one `NVML: …` line); both read as zero links, not as an error. `NVML:
Unable to retrieve NVLink information as all links are inActive` (an NVLink-capable GPU, every link down) sets
all_inactive. `dcgmi nvlink --link-status` (`gpuId 0:` then one U/D/X/_ per link) reads into the same shape:
dcgmi prints no rate: an up link reads as 1.0 (a placeholder the one-speed rule sees as equal), a down one
None.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from suite.parsers import ParseError

_GPU = re.compile(r"GPU (\d+): (.+?)(?: \(UUID: ([^)]+)\))?\s*$")
_LINK = re.compile(r"\s+Link (\d+): (.*?)\s*$")
_COUNTER = re.compile(r"(.+?):\s*(\d+)$")
_SPEED = re.compile(r"(\d+(?:\.\d+)?) GB/s$")


KIND = "nvidia-smi nvlink"
_SNIFF = re.compile(
    r"^GPU \d+: .*\n(?:\s+Link \d+: |NVML: Unable to retrieve NVLink)", re.MULTILINE | re.IGNORECASE
)
DCGMI_KIND = "dcgmi nvlink"


def sniff(head: bytes) -> bool:
    """A `GPU n: NAME` line followed by indented `Link n:` lines (either form), or by NVML's all-inactive
    line."""
    return bool(_SNIFF.search(head.decode("utf-8", "replace")))


def sniff_dcgmi(head: bytes) -> bool:
    """dcgmi's `NvLink Link Status` box."""
    text = head.decode("utf-8", "replace")
    return "NvLink Link Status" in text and "gpuId" in text


def view(parsed: dict[str, Any]) -> str:
    """Which form a parse came from: "errors" (`-e`, counters) or "status" (`-s`, speeds)."""
    return "errors" if any(g["counters"] for g in parsed["gpus"]) else "status"


def parse(text: str) -> dict[str, Any]:
    """Either form → {gpus: [{gpu, name, uuid, links: {n: text}, speeds_GBps: {n: float|None},
    counters: {n: {name: int}}}], notes: [NVML lines]}; raises ParseError naming the line it cannot read."""
    gpus: list[dict[str, Any]] = []
    notes: list[str] = []
    for number, raw in enumerate(text.splitlines(), 1):
        if not raw.strip():
            continue
        gpu = _GPU.match(raw.strip()) if not raw[:1].isspace() else None
        if gpu:
            gpus.append(
                {
                    "gpu": int(gpu.group(1)),
                    "name": gpu.group(2).strip(),
                    "uuid": gpu.group(3),
                    "links": {},
                    "speeds_GBps": {},
                    "counters": {},
                }
            )
            continue
        link = _LINK.match(raw)
        if link and gpus:
            n, value = int(link.group(1)), link.group(2)
            counter = _COUNTER.fullmatch(value)
            if counter:
                gpus[-1]["counters"].setdefault(n, {})[counter.group(1).strip()] = int(counter.group(2))
            else:
                gpus[-1]["links"][n] = value
                speed = _SPEED.fullmatch(value)
                gpus[-1]["speeds_GBps"][n] = float(speed.group(1)) if speed else None
            continue
        if raw.strip().startswith("NVML:"):
            notes.append(raw.strip())
            continue
        where = "before any 'GPU N: …' line" if link else "not a 'GPU N:' or 'Link N:' line"
        raise ParseError(
            f"line {number}: {raw.strip()[:60]!r} is {where}: not `nvidia-smi nvlink -s`/`-e` output"
        )
    return {
        "gpus": gpus,
        "notes": notes,
        "all_inactive": any("all links are inactive" in n.lower() for n in notes),
    }


DCGMI_STATES = {"U": "Up", "D": "<inactive>", "X": "Disabled", "_": None}
"""dcgmi's key: Up=U, Down=D, Disabled=X, Not Supported=_ (a link the GPU does not have: left out)."""
_DCGMI_GPU = re.compile(r"^\s*gpuId (\d+):\s*$")
_DCGMI_STATES = re.compile(r"^\s*([UDX_](?:\s+[UDX_])*)\s*$")


def parse_dcgmi(text: str) -> dict[str, Any]:
    """`dcgmi nvlink --link-status` → the `nvidia-smi nvlink -s` shape: an up link's speed is 1.0 (dcgmi
    prints no rate; the rules compare speeds only among links that state one), a down one None; X (disabled)
    is down."""
    gpus: list[dict[str, Any]] = []
    section = None
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if line in ("GPUs:", "NvSwitches:"):
            section = line
            continue
        gpu = _DCGMI_GPU.match(raw)
        if gpu and section == "GPUs:":
            gpus.append(
                {
                    "gpu": int(gpu.group(1)),
                    "name": None,
                    "uuid": None,
                    "links": {},
                    "speeds_GBps": {},
                    "counters": {},
                }
            )
            continue
        states = _DCGMI_STATES.match(raw)
        if states and section == "GPUs:" and gpus and not gpus[-1]["links"]:
            for n, state in enumerate(states.group(1).split()):
                if DCGMI_STATES[state] is not None:
                    gpus[-1]["links"][n] = DCGMI_STATES[state]
                    gpus[-1]["speeds_GBps"][n] = 1.0 if state == "U" else None
    if not gpus:
        raise ParseError(
            f"line {max(1, len(text.splitlines()))}: no `gpuId N:` line under `GPUs:`: not "
            "`dcgmi nvlink --link-status` output"
        )
    return {"gpus": gpus, "notes": [], "all_inactive": False, "tool": "dcgmi nvlink"}


def parse_any(text: str) -> dict[str, Any]:
    """Either tool's output: dcgmi's link-status box, else nvidia-smi nvlink -s/-e."""
    return parse_dcgmi(text) if "NvLink Link Status" in text else parse(text)


def parse_file(path: Path | str) -> dict[str, Any]:
    return parse_any(Path(path).read_text(encoding="utf-8"))
