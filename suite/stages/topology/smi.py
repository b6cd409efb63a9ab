"""topology's GPU face: the nvidia-smi outputs it captures and the rows and facts it builds from them.

    facts = capture_gpu(ctx, rows, tools)          # live: runs SMI_TOOLS and P2P_TOOLS, raw output in
                                                   # raw/topology/
    rows, facts, unreadable = rows_from_smi(outputs)   # live and `suite ingest`: the same rows from the same
                                                       # text
    pairs, why = p2p_pairs(outputs)                # `topo -p2p r` / `-p2p w` (or a captured `-p2p rw`) →
                                                   # pairs

P2P: `nvidia-smi topo -p2p r` and `-p2p w` say, per GPU pair, whether one GPU reads / writes the other's
memory directly. A pair without it in either direction is staged through host memory by NCCL (facts
topology.p2p, read by topology.p2p's verdict and by bandwidth's link floor, suite/facts.py link_peak_or_why).
`-p2p` is optional to the other checks: a driver or container that cannot answer it leaves topology.p2p open
with why (topology_p2p_why), never the `tools` check failed or the stage crashed.
"""

from __future__ import annotations

from typing import Any, Mapping

from suite.context import StageContext
from suite.hardware.card_fit import memory_from_query
from suite.hardware.hostprobe import run_tool
from suite.parsers import ParseError
from suite.parsers import p2p as p2p_parser
from suite.parsers.cpu import cpulist_count
from suite.parsers.smi_query import parse_list, parse_query
from suite.parsers.topo import nvlink_count
from suite.parsers.topo import parse as parse_topo
from suite.results import Row
from suite.stages.topology.rules import classify, common_model, link_class, numa_groups

STAGE = "topology"
SMI_TOOLS = (
    ("nvidia-smi-topo-m", ["nvidia-smi", "topo", "-m"]),
    ("nvidia-smi-q", ["nvidia-smi", "-q"]),
    ("nvidia-smi-L", ["nvidia-smi", "-L"]),
)
P2P_TOOLS = (
    ("nvidia-smi-topo-p2p-r", ["nvidia-smi", "topo", "-p2p", "r"]),
    ("nvidia-smi-topo-p2p-w", ["nvidia-smi", "topo", "-p2p", "w"]),
)
"""Read and write P2P, each its own raw file: a pair may allow one and not the other."""
OPTIONAL_TOOLS = frozenset(name for name, _ in P2P_TOOLS)
"""Tools whose failure is topology.p2p's (open, with why), not topology.tools' (a fail)."""


def capture_gpu(ctx: StageContext, rows: list[Row], tools: dict) -> dict[str, Any]:
    """Run every nvidia-smi tool (stdout kept untouched in raw/topology/), add the GPU rows, → the GPU
    facts."""
    runs = {name: run_tool(name, argv, ctx.raw_dir) for name, argv in SMI_TOOLS + P2P_TOOLS}
    tools.update({name: r.record() for name, r in runs.items()})
    gpu_rows, facts, unreadable = rows_from_smi(
        {name: runs[name].stdout if runs[name].ok else None for name, _ in SMI_TOOLS}
    )
    rows += gpu_rows
    # an unreadable matrix is the tool's status; an unreadable -q a detail
    for (
        name,
        why,
    ) in unreadable.items():
        if name == "nvidia-smi-topo-m":
            tools[name].update(status="unreadable", detail=why)
        else:
            tools[name]["detail"] = f"unreadable: {why}"
    pairs, why = p2p_pairs({name: runs[name].stdout if runs[name].ok else None for name, _ in P2P_TOOLS})
    for name, argv in P2P_TOOLS:
        if not runs[name].ok:
            why = "; ".join(
                filter(None, [why, f"`{' '.join(argv)}` {runs[name].status}: {runs[name].detail}"])
            )
    if pairs is not None:
        facts["p2p"] = pairs
    if why:  # said beside the pairs too: one direction read, the other not
        facts["p2p_why"] = why
    return facts


def p2p_pairs(outputs: Mapping[str, str | None]) -> tuple[dict[str, str] | None, str]:
    """`nvidia-smi topo -p2p` outputs (by name; None where not run) → ({pair: status}, why some were not
    read).

    Merged over the outputs read: a pair is OK only where every one says OK (read and write both direct), else
    it carries the first status that is not. None when no output parsed; {} on one GPU (no pair)."""
    pairs: dict[str, str] = {}
    read, whys = 0, []
    for name, text in outputs.items():
        if text is None:
            continue
        try:
            parsed = p2p_parser.parse(text)["pairs"]
        except ParseError as e:
            whys.append(f"{name}: unreadable: {e}")
            continue
        read += 1
        for pair, status in parsed.items():
            if pairs.get(pair, "OK") == "OK":
                pairs[pair] = status
    return (pairs if read else None), "; ".join(whys)


def rows_from_smi(outputs: dict[str, str | None]) -> tuple[list[Row], dict[str, Any], dict[str, str]]:
    """nvidia-smi's outputs (by SMI_TOOLS name; None where not run) → (rows, topology facts, {tool: why
    unreadable}).

    The stage's run() and `python -m suite ingest` both build their rows here."""
    rows: list[Row] = []
    unreadable: dict[str, str] = {}
    listed, queried, matrix = (outputs.get(n) for n in ("nvidia-smi-L", "nvidia-smi-q", "nvidia-smi-topo-m"))
    names = [g["name"] for g in parse_list(listed)] if listed is not None else []
    query: dict[str, Any] = {}
    if queried is not None:
        try:
            query = parse_query(queried)
        except ParseError as e:
            unreadable["nvidia-smi-q"] = str(e)
    names = names or [g["product_name"] for g in query.get("gpus", []) if g.get("product_name")]
    facts: dict[str, Any] = {
        "gpus": names,
        "gpu_model": common_model(names),
        "smi_versions": {"driver": query.get("driver_version"), "cuda_driver": query.get("cuda_version")},
    }
    if query:  # every stage sizes itself to the smallest card (suite/hardware/card_fit.py)
        facts["gpu_memory_bytes"] = memory_from_query(queried)
    for i, gpu in enumerate(query.get("gpus", [])):
        for key in ("pcie_gen_max", "link_width_max"):
            if gpu.get(key) is not None:
                rows.append(
                    Row(
                        stage=STAGE,
                        case=f"GPU{i}",
                        metric=key,
                        value=gpu[key],
                        unit="count",
                        source="nvidia-smi -q",
                    )
                )
        if gpu.get("fabric_state"):
            rows.append(
                Row(
                    stage=STAGE,
                    case=f"GPU{i}",
                    metric="fabric_state",
                    value=float("nan"),
                    unit="",
                    text=f"{gpu['fabric_state']} / {gpu.get('fabric_status') or 'N/A'}",
                )
            )
    gens = [g["pcie_gen_max"] for g in query.get("gpus", []) if g.get("pcie_gen_max")]
    widths = [g["link_width_max"] for g in query.get("gpus", []) if g.get("link_width_max")]
    facts["pcie"] = {
        "gen_max": min(gens) if gens else None,
        "width_max": min(widths) if widths else None,
        "per_gpu": {
            f"GPU{i}": {"gen": g.get("pcie_gen_max"), "width": g.get("link_width_max")}
            for i, g in enumerate(query.get("gpus", []))
        },
    }
    for i, name in enumerate(names):
        rows.append(
            Row(
                stage=STAGE,
                case=f"GPU{i}",
                metric="gpu_name",
                value=float("nan"),
                unit="",
                text=name,
                source="nvidia-smi -L",
            )
        )

    topo = None
    if matrix is not None:
        try:
            topo = parse_topo(matrix)
        except ParseError as e:
            unreadable["nvidia-smi-topo-m"] = str(e)
    count = len(topo.gpus) if topo else len(names)
    rows.append(
        Row(stage=STAGE, case="gpus", metric="gpu_count", value=count, unit="count", source="nvidia-smi")
    )
    facts["gpu_count"] = count
    if topo is None:
        return rows, facts, unreadable
    for pair, link in topo.links.items():
        rows.append(
            Row(
                stage=STAGE,
                case=pair,
                metric="link",
                value=nvlink_count(link),
                unit="count",
                text=link,
                source="nvidia-smi topo -m",
            )
        )
    for pair, link in topo.gpu_nic_links.items():
        rows.append(
            Row(
                stage=STAGE,
                case=pair,
                metric="nic_link",
                value=float("nan"),
                unit="",
                text=link,
                source="nvidia-smi topo -m",
            )
        )
    for g in topo.gpus:
        cpus = (topo.cpu_affinity or {}).get(g)
        numa = (topo.numa_affinity or {}).get(g)
        rows.append(
            Row(stage=STAGE, case=g, metric="cpu_affinity", value=cpu_count(cpus), unit="count", text=cpus)
        )
        rows.append(
            Row(
                stage=STAGE,
                case=g,
                metric="numa_node",
                unit="",
                value=int(numa) if numa and numa.isdigit() else float("nan"),
                text=numa,
            )
        )
    facts.update(matrix_facts(topo, facts["gpu_model"]))
    return rows, facts, unreadable


def matrix_facts(topo, model: str | None) -> dict[str, Any]:
    """What the matrix tells later stages (suite/facts.py reads it): box kind, link class, the links
    themselves."""
    box = classify(topo.gpus, topo.links, model)
    klass = link_class(topo.links, topo.gpus, model)
    return dict(
        box=box.kind,
        link_class=klass,
        nvlink=klass.startswith("NV"),
        nvlink_count=int(klass[2:]) if klass.startswith("NV") and klass[2:].isdigit() else None,
        links=topo.links,
        nics=topo.nics,
        nic_legend=topo.nic_legend,
        gpu_nic_links=topo.gpu_nic_links,
        gpu_numa=numa_groups(topo.gpus, topo.numa_affinity, topo.cpu_affinity),
    )


def cpu_count(cpulist: str | None) -> float:
    """CPUs in a `0-63,128-191` list; NaN where it does not read."""
    try:
        n = cpulist_count(cpulist)
    except ValueError:
        return float("nan")
    return float("nan") if n is None else n
