"""`nvidia-smi topo -m` → the GPU×GPU link matrix, GPU–NIC paths and CPU/NUMA affinity.

    python -m suite parse topo raw/topology/nvidia-smi-topo-m.txt --json

Reads the real variety of captures (tests/data/topo/ holds them with their sources):
tab- or space-aligned tables, a header that lost its leading tab or whose device names ran
together ("GPU0GPU1…mlx5_0"), shell prompts or labels before the table, ANSI underline codes
in the header (`\\x1b[4m`, or a bare `[4m` once the escape byte is lost), NIC columns named
`NIC#` (with a `NIC Legend`) or `mlx5_N`, the three generations of affinity columns
(CPU Affinity; + NUMA Affinity; + GPU NUMA ID), empty padding fields, a single GPU, and the
old legend (SOC instead of SYS, no NODE).

How a row is read: cells are whitespace-separated tokens. The first D tokens after the row's
label are the D device columns (one of them the diagonal `X`); the remaining tokens fill the
affinity columns in order. nvidia-smi pads those columns with extra tabs (`0\\t\\tN/A`), so
empty fields carry no meaning and are dropped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from suite.parsers import ParseError

TOOL = "nvidia-smi topo -m"

# ESC [ 4 m / ESC [ 0 m, and the same with the escape byte lost in a copy-paste.
_ANSI = re.compile(r"\x1b?\[[0-9;]*m")
AFFINITY_COLUMNS = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")
# The legend's link types, old (SOC) and new (NODE, SYS); NV# is NV followed by the link count.
KNOWN_LINKS = ("X", "SYS", "SOC", "NODE", "PHB", "PXB", "PIX")
_NVLINK = re.compile(r"NV(\d+)")
# A future legend entry (upper-case word) still parses; lower case, digits first or '/' do not.
_LINK_WORD = re.compile(r"[A-Z][A-Z0-9]{0,5}")
_GPU_RUN = re.compile(r"((?:GPU\d+)+)(.*)")
_LEGEND_LINE = re.compile(r"\s*(X|NV#|[A-Z]{2,6})\s+=\s+(.+)")
_NIC_LEGEND_LINE = re.compile(r"\s*(NIC\d+)\s*:\s*(\S+)\s*$")


@dataclass
class Topology:
    """One `nvidia-smi topo -m` matrix. Link texts are kept as printed (SOC stays SOC)."""

    gpus: list[str]
    """GPU column names in header order: GPU0, GPU1, …"""
    nics: list[str]
    """NIC column names in header order: NIC0… or mlx5_0…"""
    links: dict[str, str]
    """Upper triangle of the GPU block: 'GPU0-GPU1' → 'NV12'."""
    gpu_nic_links: dict[str, str]
    """'GPU0-NIC0' → 'PIX', for every GPU and NIC."""
    nic_legend: dict[str, str] = field(default_factory=dict)
    """'NIC0' → 'mlx5_0' from the NIC Legend (empty when the columns carry device names)."""
    cpu_affinity: dict[str, str | None] | None = None
    """'GPU0' → '0-47'; None when the table has no CPU Affinity column."""
    numa_affinity: dict[str, str | None] | None = None
    """'GPU0' → '0'; None when the table has no NUMA Affinity column."""
    gpu_numa_id: dict[str, str | None] | None = None
    """'GPU0' → 'N/A'; None when the table has no GPU NUMA ID column."""
    trailing_columns: list[str] = field(default_factory=list)
    """The affinity columns the header names, in order."""
    legend: dict[str, str] = field(default_factory=dict)
    """Legend symbol → meaning, as printed under the table (empty when the capture has none)."""

    def link(self, a: str, b: str) -> str:
        """The link between two GPUs, either order."""
        return self.links.get(f"{a}-{b}") or self.links[f"{b}-{a}"]

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape of `python -m suite parse topo` (without the verdicts)."""
        return {
            "gpus": list(self.gpus),
            "num_gpus": len(self.gpus),
            "links": dict(self.links),
            "nics": list(self.nics),
            "nic_legend": dict(self.nic_legend),
            "gpu_nic_links": dict(self.gpu_nic_links),
            "cpu_affinity": self.cpu_affinity,
            "numa_affinity": self.numa_affinity,
            "gpu_numa_id": self.gpu_numa_id,
            "trailing_columns": list(self.trailing_columns),
        }


def nvlink_count(link: str) -> int:
    """Number of bonded NVLinks a link text names: 'NV18' → 18; anything else → 0."""
    m = _NVLINK.fullmatch(link)
    return int(m.group(1)) if m else 0


# `nvidia-smi topo -p2p r` prints a matrix of the same shape with these words instead of link types.
P2P_STATUSES = ("OK", "CNS", "GNS", "TNS", "NS", "DR", "U")


def is_link_text(cell: str) -> bool:
    if cell in P2P_STATUSES:
        return False
    return cell in KNOWN_LINKS or bool(_NVLINK.fullmatch(cell)) or bool(_LINK_WORD.fullmatch(cell))


# ---------------------------------------------------------------- parsing


def parse(text: str) -> Topology:
    """Parse one `nvidia-smi topo -m` output; raises ParseError naming the line that is wrong."""
    lines = [_ANSI.sub("", line).rstrip("\r") for line in text.splitlines()]
    header_index = _find_header(lines)
    gpus, nics, trailing = _read_header(lines[header_index], header_index + 1)
    devices = gpus + nics
    rows, end = _read_rows(lines, header_index + 1, devices, trailing)

    missing = [g for g in gpus if g not in rows]
    if missing:
        where = f"line {end + 1}" if end < len(lines) else "the end of the input"
        raise ParseError(
            f"the header names {', '.join(gpus)} but {', '.join(missing)} has no row "
            f"(the table ends at {where}): the capture is cut short"
        )

    links = {}
    for i, a in enumerate(gpus):
        for b in gpus[i + 1 :]:
            links[f"{a}-{b}"] = rows[a]["cells"][devices.index(b)]
    gpu_nic_links = {f"{g}-{n}": rows[g]["cells"][devices.index(n)] for g in gpus for n in nics}

    columns: dict[str, dict[str, str | None]] = {name: {} for name in trailing}
    for g in gpus:
        values = rows[g]["trailing"]
        for k, name in enumerate(trailing):
            columns[name][g] = values[k] if k < len(values) else None

    legend, nic_legend = _read_legends(lines[end:])
    return Topology(
        gpus=gpus,
        nics=nics,
        links=links,
        gpu_nic_links=gpu_nic_links,
        nic_legend=nic_legend,
        cpu_affinity=columns.get("CPU Affinity"),
        numa_affinity=columns.get("NUMA Affinity"),
        gpu_numa_id=columns.get("GPU NUMA ID"),
        trailing_columns=list(trailing),
        legend=legend,
    )


def _find_header(lines: list[str]) -> int:
    """The header is the first line that starts with GPU0 and is not GPU0's own row (which has X next)."""
    for index, line in enumerate(lines):
        tokens = line.split()
        if not tokens or not tokens[0].startswith("GPU0"):
            continue
        if tokens[0] != "GPU0" or len(tokens) == 1 or tokens[1] != "X":
            return index
    first = next(
        (
            f"its first text is line {i + 1}: {' '.join(l.split())[:60]!r}"
            for i, l in enumerate(lines)
            if l.strip()
        ),
        "the input is empty",
    )
    raise ParseError(
        f"no topology header (a line naming GPU0 GPU1 … CPU Affinity) found; {first}. Pass the output of "
        f"`{TOOL}`"
    )


def _read_header(line: str, lineno: int) -> tuple[list[str], list[str], list[str]]:
    trailing = []
    device_part = line
    # A copy that expanded tabs can leave several spaces inside a column name ("CPU     Affinity").
    found = [
        (m.start(), name)
        for name in AFFINITY_COLUMNS
        for m in [re.search(r"\s+".join(map(re.escape, name.split())), line)]
        if m
    ]
    positions = sorted(found)
    if positions:
        device_part = line[: positions[0][0]]
        trailing = [name for _, name in positions]
    gpus: list[str] = []
    nics: list[str] = []
    for token in device_part.split():
        m = _GPU_RUN.fullmatch(token)
        if m:
            if nics:
                raise ParseError(f"line {lineno}: GPU column {m.group(1)} comes after NIC columns {nics}")
            gpus.extend(re.findall(r"GPU\d+", m.group(1)))
            token = m.group(2)
            if not token:
                continue
        nics.append(token)
    if len(set(gpus + nics)) != len(gpus + nics):
        raise ParseError(f"line {lineno}: a column is named twice in the header: {gpus + nics}")
    return gpus, nics, trailing


def _read_rows(lines: list[str], start: int, devices: list[str], trailing: list[str]) -> tuple[dict, int]:
    """Rows from `start` until a blank line, a line that is not a device row, or the end."""
    rows: dict[str, dict[str, list[str]]] = {}
    width = len(devices)
    index = start
    while index < len(lines):
        tokens = lines[index].split()
        if not tokens or tokens[0] not in devices or tokens[0] in rows:
            break
        lineno = index + 1
        label = tokens[0]
        cells = tokens[1 : 1 + width]
        if len(cells) < width:
            raise ParseError(
                f"line {lineno}: row {label} has {len(cells)} link cells but the header names {width} "
                f"devices ({' '.join(devices)})"
            )
        for column, cell in zip(devices, cells):
            if cell in P2P_STATUSES:
                raise ParseError(
                    f"line {lineno}: cell {cell!r} ({label} to {column}) is a peer-to-peer status: this is "
                    f"the "
                    f"matrix of `nvidia-smi topo -p2p`, not of `{TOOL}`"
                )
            if not is_link_text(cell):
                raise ParseError(
                    f"line {lineno}: cell {cell!r} ({label} to {column}) is not a link type "
                    f"(X, NV#, PIX, PXB, PHB, NODE, SYS, SOC)"
                )
        own = cells[devices.index(label)]
        if own != "X":
            raise ParseError(
                f"line {lineno}: {label}'s own column reads {own!r}, not X: the row is misaligned"
            )
        extra = tokens[1 + width :]
        if label.startswith("GPU") and len(extra) > len(trailing):
            raise ParseError(
                f"line {lineno}: row {label} has {len(extra)} values after the link cells "
                f"({' '.join(extra)}) but the header names {len(trailing)} affinity columns"
            )
        rows[label] = {"cells": cells, "trailing": extra}
        index += 1
    return rows, index


def _read_legends(lines: list[str]) -> tuple[dict[str, str], dict[str, str]]:
    legend: dict[str, str] = {}
    nic_legend: dict[str, str] = {}
    in_nic_legend = False
    for line in lines:
        if line.strip() == "NIC Legend:":
            in_nic_legend = True
            continue
        if in_nic_legend:
            m = _NIC_LEGEND_LINE.fullmatch(line)
            if m:
                nic_legend[m.group(1)] = m.group(2)
            elif line.strip():
                in_nic_legend = False
            continue
        m = _LEGEND_LINE.fullmatch(line)
        if m:
            legend[m.group(1)] = m.group(2).strip()
    return legend, nic_legend


# ---------------------------------------------------------------- the CLI's view


def parse_file(path: Path | str) -> dict[str, Any]:
    """`python -m suite parse topo FILE --json`: the parse (the command adds the topology stage's
    verdicts)."""
    return parse(Path(path).read_text(encoding="utf-8")).to_dict()


# ---------------------------------------------------------------- sniffing (suite ingest)

KIND = "nvidia-smi topo -m"


def sniff(head: bytes) -> bool:
    """Whether a file's first bytes look like `nvidia-smi topo -m`: a header naming GPU0 (tabs lost in some
    copies glue it to GPU1) above GPU0's own row (X)."""
    lines = [line.split() for line in _ANSI.sub("", head.decode("utf-8", "replace")).splitlines()]
    row = next((i for i, t in enumerate(lines) if t[:2] == ["GPU0", "X"]), None)
    return row is not None and any(
        t and t[0].startswith("GPU0") and t[:2] != ["GPU0", "X"] for t in lines[:row]
    )
