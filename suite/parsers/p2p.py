"""`nvidia-smi topo -p2p r|w|rw|a|n` → whether each GPU pair can reach the other's memory directly (P2P).

        GPU0	GPU1
     GPU0	X	GNS            OK: P2P; CNS chipset, GNS GPU, TNS topology, NS not supported; DR disabled by
     GPU1	GNS	X              regkey; U unknown

A pair without P2P still communicates: NCCL stages its traffic through host memory (SHM), bounded by the
CPUs' memory and interconnect, not by the PCIe link (GeForce cards report GNS: P2P is off on them).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from suite.parsers import ParseError

KIND = "nvidia-smi topo -p2p"
STATUS = {
    "OK": "P2P supported",
    "CNS": "chipset not supported",
    "GNS": "GPU not supported",
    "TNS": "topology not supported",
    "NS": "not supported",
    "DR": "disabled by regkey",
    "U": "unknown",
}
_GPU = re.compile(r"GPU\d+$")


def parse(text: str) -> dict[str, Any]:
    """→ {gpus: [GPU0, …], pairs: {'GPU0-GPU1': 'GNS'}, without_p2p: {pair: reason}} (each pair once, a<b)."""
    lines = [line.strip() for line in text.splitlines()]
    header = next(
        (i for i, line in enumerate(lines) if line.split() and all(_GPU.match(t) for t in line.split())), None
    )
    if header is None:
        raise ParseError("line 1: no `GPU0 GPU1 …` header: not `nvidia-smi topo -p2p` output")
    gpus = lines[header].split()
    pairs: dict[str, str] = {}
    for number, line in enumerate(lines[header + 1 :], header + 2):
        cells = line.split()
        if not cells or not _GPU.match(cells[0]):
            break
        if len(cells) != len(gpus) + 1:
            raise ParseError(
                f"line {number}: {len(cells) - 1} cells for {len(gpus)} GPUs: the matrix is cut or garbled"
            )
        for other, cell in zip(gpus, cells[1:]):
            if cell == "X":
                continue
            if cell not in STATUS:
                raise ParseError(f"line {number}: {cell!r} is not a P2P status ({', '.join(STATUS)})")
            a, b = sorted((cells[0], other), key=lambda g: int(g[3:]))
            pairs.setdefault(f"{a}-{b}", cell)
    if not pairs and len(gpus) > 1:
        raise ParseError(f"line {header + 2}: no matrix row below the header: the output was cut")
    return {
        "gpus": gpus,
        "pairs": pairs,
        "without_p2p": {pair: STATUS[s] for pair, s in pairs.items() if s != "OK"},
    }


def sniff(head: bytes) -> bool:
    """The matrix's legend: `OK = Status Ok` with `GNS`/`CNS` lines (topo -m's legend has none of them)."""
    text = head.decode("utf-8", "replace")
    return re.search(r"OK\s+= Status Ok", text) is not None and "Chipset not supported" in text


def parse_file(path: Path | str) -> dict[str, Any]:
    return parse(Path(path).read_text(encoding="utf-8"))
