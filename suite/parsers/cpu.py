"""`lscpu`, `numactl -H` and Linux cpulists → CPU and NUMA facts.

lscpu        'Model name:  AMD EPYC 9654 96-Core Processor', 'NUMA node0 CPU(s):  0-95,192-287'
numactl -H   'node 0 cpus: 0 1 2 …', 'node 0 size: 773808 MB'
cpulist      '0-11,24-35' (sysfs, nvidia-smi's CPU Affinity) → 24 CPUs
"""

from __future__ import annotations

import re
from typing import Any

_LSCPU_LINE = re.compile(r"\s*([^:]+?)\s*:\s*(.*?)\s*$")
_LSCPU_NUMA = re.compile(r"NUMA node(\d+) CPU\(s\)")
_NUMACTL_CPUS = re.compile(r"node (\d+) cpus:(.*)$")
_NUMACTL_SIZE = re.compile(r"node (\d+) size: (\d+) MB")


def cpulist_count(cpulist: str | None) -> int | None:
    """'0-11,24-35' → 24; '' or 'N/A' → None. Raises ValueError on anything else."""
    if not cpulist or cpulist.strip() in ("", "N/A"):
        return None
    total = 0
    for part in cpulist.strip().split(","):
        lo, _, hi = part.partition("-")
        total += int(hi or lo) - int(lo) + 1
    return total


def parse_lscpu(text: str) -> dict[str, Any]:
    """lscpu's `Key: value` lines → model, counts and the NUMA nodes' cpulists (absent keys are None)."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        m = _LSCPU_LINE.fullmatch(line)
        if m and m.group(2):
            fields.setdefault(m.group(1), m.group(2))
    numa = {f"node{m.group(1)}": v for k, v in fields.items() if (m := _LSCPU_NUMA.fullmatch(k))}

    def num(key: str) -> int | None:
        value = fields.get(key)
        return int(value) if value and value.isdigit() else None

    return {
        "model": fields.get("Model name"),
        "architecture": fields.get("Architecture"),
        "cpus": num("CPU(s)"),
        "threads_per_core": num("Thread(s) per core"),
        "cores_per_socket": num("Core(s) per socket"),
        "sockets": num("Socket(s)"),
        "numa_nodes": num("NUMA node(s)"),
        "numa_cpus": numa,
    }


def parse_numactl_hardware(text: str) -> dict[str, dict[str, Any]]:
    """`numactl -H` → {'node0': {'cpus': '0-3,8-11', 'size_mb': 32663}} (cpus rewritten as a cpulist)."""
    nodes: dict[str, dict[str, Any]] = {}
    for line in text.splitlines():
        m = _NUMACTL_CPUS.match(line.strip())
        if m:
            nodes.setdefault(f"node{m.group(1)}", {})["cpus"] = to_cpulist(int(c) for c in m.group(2).split())
            continue
        m = _NUMACTL_SIZE.match(line.strip())
        if m:
            nodes.setdefault(f"node{m.group(1)}", {})["size_mb"] = int(m.group(2))
    return nodes


def to_cpulist(cpus) -> str:
    """[0, 1, 2, 3, 8] → '0-3,8'."""
    ordered = sorted(set(cpus))
    parts, start = [], None
    for i, cpu in enumerate(ordered):
        if start is None:
            start = cpu
        if i + 1 == len(ordered) or ordered[i + 1] != cpu + 1:
            parts.append(f"{start}-{cpu}" if cpu != start else str(cpu))
            start = None
    return ",".join(parts)
