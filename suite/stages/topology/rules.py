"""What wrong looks like in a GPU topology (CHECKLIST row 1): pure rules over the link matrix.

The topology stage's judge() calls judge_links()/judge_numa(); `python -m suite parse topo` adds
verdicts_for_parse() to the parser's output (parsers return parses only).

A box is one of:
  switched     every GPU reaches every other over NVLink with one NVLink count (NVSwitch, or a full
               point-to-point mesh such as a 4-GPU HGX), or its GPU model ships only on such boards:
               every GPU pair must then read NV#, all with the same count.
  nvlink-mesh  some pairs NVLink by design, others not, or NVLink counts differing between pairs
               (DGX-1's hybrid cube mesh, a V100 SXM2 partial mesh, NVLink-bridged PCIe cards,
               POWER9 boxes): pairs without NVLink are by design, noted and never failed.
  pcie         no NVLink at all: passes, unless the GPU model ships only on switch boards, where PCIe
               between GPUs means a slot, baseboard or virtualisation problem.

Differing NV counts mean a mesh, not a switch: an NVSwitch gives every GPU the same links to every
peer. Without the GPU model (the stage reads it from `nvidia-smi -L`; the parse command has none) a
switched box with links down cannot be told from a mesh, and passes with its non-NVLink pairs noted.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from suite.hardware.gpus import gpu_for
from suite.parsers.topo import nvlink_count
from suite.results import Verdict
from suite.verdicts import verdicts_for

STAGE = "topology"
CROSS_NUMA_LINKS = ("SYS", "SOC")  # SOC is the pre-2017 name of SYS: across the CPU sockets' interconnect
PCIE_LINKS = ("PIX", "PXB", "PHB", "NODE", "SYS", "SOC")


@dataclass(frozen=True)
class BoxKind:
    kind: str
    """switched, nvlink-mesh, pcie or single."""
    why: str
    """One phrase: how the kind was decided."""


def expects_full_nvlink(model: str | None) -> bool:
    """True for GPU models that ship only on boards linking every GPU pair over NVLink
    (suite/hardware/gpus.py)."""
    gpu = gpu_for(model)
    return bool(gpu and gpu.switch_boards_only)


def judge_p2p(pairs: Mapping[str, str] | None, why: str = "") -> list[Verdict]:
    """topology.p2p from `nvidia-smi topo -p2p r` (and `-p2p w` live), where it was read; no verdict where an
    ingest holds no `-p2p` capture (optional) or one GPU has no pair. A pair without P2P (GeForce cards: GNS)
    is staged through host memory by NCCL: it works, slower than its link, so it warns with the reason and
    bandwidth holds it to the staged floor, never the direct one. A live `-p2p` that did not answer (`why`)
    leaves the check open: bandwidth then cannot tell a staged pair from a slow direct one."""
    expected = "P2P between every GPU pair (`nvidia-smi topo -p2p r`/`w`: OK)"
    if pairs is None and why:
        return [
            VERDICTS.skip(
                "p2p",
                expected=expected,
                observed="not read",
                reason=(
                    f"{why}: which GPU pairs reach each other's memory directly is unknown, so bandwidth "
                    f"holds every pair "
                    "to its direct link; run `nvidia-smi topo -p2p r` on the box by hand (an old driver may "
                    "lack the "
                    "option) and `suite ingest` its output with the run's other captures"
                ),
            )
        ]
    if not pairs:
        return []
    without = {p: s for p, s in pairs.items() if s != "OK"}
    if not without:
        return [
            VERDICTS.passed(
                "p2p",
                expected=expected,
                observed=f"{len(pairs)} pair(s) OK",
                reason="every GPU pair reads the other's memory directly",
            )
        ]
    shown = ", ".join(f"{p} {s}" for p, s in list(without.items())[:6]) + (" …" if len(without) > 6 else "")
    return [
        VERDICTS.warn(
            "p2p",
            expected=expected,
            observed=f"{len(without)} of {len(pairs)} pair(s) without P2P: {shown}",
            reason="no P2P between these GPUs: NCCL stages their traffic through host "
            "memory (SHM), so their bandwidth is bounded by the CPUs' memory and interconnect, not "
            "the PCIe link (GNS: GeForce cards have P2P off; CNS/TNS: the chipset or topology); "
            "bandwidth holds them to the staged floor",
        )
    ]


def no_fabric_state(expected: str, model: str | None) -> Verdict:
    """topology.fabric where no GPU reports a fabric state: open on a part that ships on NVSwitch boards (its
    fabric must be up and was not shown), not applicable on any other (no NVSwitch fabric to bring up)."""
    if expects_full_nvlink(model):
        return VERDICTS.skip(
            "fabric",
            expected=expected,
            observed="not reported",
            reason=f"{model} runs on an NVSwitch board and no GPU reports its fabric state (an "
            "older driver, or no `nvidia-smi -q` read)",
        )
    return VERDICTS.not_applicable(
        "fabric",
        expected=expected,
        observed="not reported",
        why=f"no NVSwitch fabric on {model or 'these GPUs'}",
    )


def common_model(gpu_names: Iterable[str] | None) -> str | None:
    names = [n for n in (gpu_names or []) if n]
    return Counter(names).most_common(1)[0][0] if names else None


def nvlink_degrees(gpus: list[str], links: Mapping[str, str]) -> dict[str, int]:
    """How many NVLink peers each GPU has."""
    degree = {g: 0 for g in gpus}
    for pair, link in links.items():
        if nvlink_count(link):
            a, b = pair.split("-")
            degree[a] += 1
            degree[b] += 1
    return degree


def classify(gpus: list[str], links: Mapping[str, str], model: str | None = None) -> BoxKind:
    n = len(gpus)
    if n < 2:
        return BoxKind("single", "one GPU")
    if expects_full_nvlink(model):
        return BoxKind("switched", f"{model} ships only on boards that link every GPU pair over NVLink")
    counts = {nvlink_count(link) for link in links.values()}  # 0 for a pair without NVLink
    if counts == {0}:
        return BoxKind("pcie", "no GPU pair has NVLink")
    if 0 not in counts and len(counts) == 1:
        return BoxKind("switched", f"every GPU pair has NVLink, all NV{counts.pop()}")
    if 0 not in counts:
        return BoxKind(
            "nvlink-mesh", "every GPU pair has NVLink but the counts differ: a point-to-point mesh"
        )
    most = max(nvlink_degrees(gpus, links).values())
    return BoxKind("nvlink-mesh", f"at most {most} of {n - 1} NVLink peers per GPU: a point-to-point mesh")


def link_summary(links: Mapping[str, str]) -> str:
    """'28×NV18', '16×NV1/NV2 + 12×SYS', '28×SYS': how the GPU pairs are linked."""
    counts = Counter(links.values())
    nv = sorted((k for k in counts if nvlink_count(k)), key=nvlink_count)
    other = sorted(k for k in counts if not nvlink_count(k))
    parts = []
    if nv:
        parts.append(f"{sum(counts[k] for k in nv)}×{'/'.join(nv)}")
    parts += [f"{counts[k]}×{k}" for k in other]
    return " + ".join(parts) if parts else "no GPU pairs"


def link_class(links: Mapping[str, str], gpus: list[str], model: str | None = None) -> str:
    """What later stages need to pick a link peak: 'NV18' (switched), 'NVLink mesh', 'PCIe', 'single'."""
    kind = classify(gpus, links, model).kind
    if kind == "switched":
        counts = sorted({nvlink_count(v) for v in links.values() if nvlink_count(v)})
        return f"NV{counts[0]}" if counts else "PCIe"
    return {"nvlink-mesh": "NVLink mesh", "pcie": "PCIe", "single": "single"}[kind]


def numa_groups(
    gpus: list[str],
    numa_affinity: Mapping[str, str | None] | None,
    cpu_affinity: Mapping[str, str | None] | None,
) -> dict[str, str | None]:
    """Each GPU's NUMA node ('node 1'), or its CPU set ('cpus 0-11,24-35') where the table has no NUMA
    column."""
    out: dict[str, str | None] = {}
    for g in gpus:
        numa = (numa_affinity or {}).get(g)
        cpus = (cpu_affinity or {}).get(g)
        if numa and numa.isdigit():
            out[g] = f"node {numa}"
        elif cpus and cpus != "N/A":
            out[g] = f"cpus {cpus}"
        else:
            out[g] = None
    return out


def cross_numa_pairs(links: Mapping[str, str], groups: Mapping[str, str | None]) -> list[str]:
    """GPU pairs whose traffic crosses the CPU interconnect: SYS/SOC, or PCIe between GPUs of different NUMA
    nodes."""
    out = []
    for pair, link in links.items():
        if nvlink_count(link):
            continue
        a, b = pair.split("-")
        differ = groups.get(a) is not None and groups.get(b) is not None and groups[a] != groups[b]
        if link in CROSS_NUMA_LINKS or differ:
            out.append(pair)
    return out


# ---------------------------------------------------------------- verdicts

VERDICTS = verdicts_for(STAGE)


def judge_links(gpus: list[str], links: Mapping[str, str], gpu_names: Iterable[str] | None = None) -> Verdict:
    """topology.links: the GPU×GPU link types judged against the kind of box."""
    model = common_model(gpu_names)
    box = classify(gpus, links, model)
    summary = link_summary(links)
    if box.kind == "single":
        return VERDICTS.not_applicable(
            "links",
            expected="GPU pairs to judge",
            observed=f"{len(gpus)} GPU",
            why="one GPU: there is no GPU pair to judge",
        )
    nv = {p: nvlink_count(v) for p, v in links.items() if nvlink_count(v)}
    if box.kind == "switched":
        not_nv = [p for p in links if p not in nv]
        counts = Counter(nv.values())
        want = counts.most_common(1)[0][0] if counts else None
        odd = [p for p, c in nv.items() if c != want]
        expected = f"every GPU pair NV{want if want else '#'}, one NVLink count ({box.why})"
        if not not_nv and not odd:
            return VERDICTS.passed(
                "links",
                expected=expected,
                observed=summary,
                reason=f"switched NVLink box: all {len(links)} GPU pairs on NVLink with the same count",
            )
        problems = []
        if not_nv:
            problems.append(
                f"{', '.join(f'{p} {links[p]}' for p in not_nv[:6])}"
                f"{' …' if len(not_nv) > 6 else ''} without NVLink"
            )
        if odd:
            problems.append(f"{', '.join(f'{p} {links[p]}' for p in odd[:6])} with a different NVLink count")
        return VERDICTS.fail(
            "links",
            expected=expected,
            observed=summary,
            reason=(
                "; ".join(problems) + ": on a switched box this means NVLinks are down or the GPUs are "
                "split across VMs/partitions. Check `nvidia-smi nvlink -s`, the fabric manager "
                "(`systemctl status nvidia-fabricmanager`) and `nvidia-smi -q` Fabric state; ask the "
                "provider for a healthy node before measuring"
            ),
        )
    if box.kind == "nvlink-mesh":
        degree = nvlink_degrees(gpus, links)
        isolated = [g for g in gpus if degree[g] == 0]
        expected = "point-to-point NVLink mesh: each GPU with at least one NVLink peer"
        if isolated:
            return VERDICTS.warn(
                "links",
                expected=expected,
                observed=summary,
                reason=(
                    f"{', '.join(isolated)} {'has' if len(isolated) == 1 else 'have'} no NVLink peer while "
                    f"other GPUs do: a bridge is missing or its links are down (`nvidia-smi nvlink -s`); "
                    f"keep {', '.join(isolated)} out of tensor-parallel groups"
                ),
            )
        return VERDICTS.passed(
            "links",
            expected=expected,
            observed=summary,
            reason=f"{box.why}; {_pairs_without_nvlink(links, nv)}",
        )
    # PCIe only
    expected = "PCIe between GPUs" + (f" ({model} is not an NVLink board)" if model else "")
    return VERDICTS.passed(
        "links",
        expected=expected,
        observed=summary,
        reason="PCIe-only box: no NVLink expected; bandwidth is judged against the PCIe peak",
    )


def _pairs_without_nvlink(links: Mapping[str, str], nv: Mapping[str, int]) -> str:
    """'GPU0-GPU3 NODE, GPU1-GPU2 NODE: 2 pairs without NVLink, by design …' (a mesh's PCIe pairs, noted)."""
    off = [f"{p} {link}" for p, link in links.items() if p not in nv]
    if not off:
        return "every pair on NVLink"
    shown = ", ".join(off[:6]) + (" …" if len(off) > 6 else "")
    return (
        f"{shown}: {len(off)} pair{'s' if len(off) > 1 else ''} without NVLink, by design (traffic between "
        f"them rides PCIe; on an NVSwitch board this would mean links down: pass the GPU model to tell)"
    )


def judge_numa(gpus: list[str], links: Mapping[str, str], groups: Mapping[str, str | None]) -> Verdict:
    """topology.numa: warns of GPU pairs whose traffic crosses NUMA nodes (a SYS hop; never a failure by
    itself)."""
    if len(gpus) < 2:
        return VERDICTS.not_applicable(
            "numa",
            expected="GPU pairs to place",
            observed=f"{len(gpus)} GPU",
            why="one GPU: no GPU pair can cross NUMA nodes",
        )
    crossing = cross_numa_pairs(links, groups)
    nodes = sorted({g for g in groups.values() if g})
    expected = "GPU pairs without NVLink kept inside one NUMA node where possible"
    if not crossing:
        return VERDICTS.passed(
            "numa",
            expected=expected,
            observed="no GPU pair crosses NUMA nodes",
            reason="every GPU pair is on NVLink or under one NUMA node",
        )
    shown = ", ".join(crossing[:8]) + (" …" if len(crossing) > 8 else "")
    by_group = "; ".join(f"{grp}: {' '.join(g for g in gpus if groups.get(g) == grp)}" for grp in nodes)
    return VERDICTS.warn(  # a SYS hop works, slower: a warning to place groups by, never a failed box
        "numa",
        expected=expected,
        observed=f"{len(crossing)} of {len(links)} GPU pairs cross NUMA nodes: {shown}",
        reason=(
            f"these pairs move data over the CPU interconnect (QPI/UPI/xGMI), slower than PCIe inside "
            f"a node; keep tensor-parallel groups within one NUMA node ({by_group or 'NUMA nodes unknown'})"
        ),
    )


def verdicts_for_parse(parse: Mapping[str, Any], gpu_names: Iterable[str] | None = None) -> list[Verdict]:
    """Both topology verdicts for one parsed matrix (`python -m suite parse topo`'s JSON shape)."""
    gpus, links = list(parse["gpus"]), dict(parse["links"])
    groups = numa_groups(gpus, parse.get("numa_affinity"), parse.get("cpu_affinity"))
    return [judge_links(gpus, links, gpu_names), judge_numa(gpus, links, groups)]


def judge_fabric(rows: list, facts: dict) -> Verdict:
    """topology.fabric: every GPU's NVSwitch fabric state 'Completed' (where the box reports one)."""
    states = {r.case: r.text for r in rows if r.metric == "fabric_state" and r.text}
    known = {g: s for g, s in states.items() if not s.startswith("N/A")}
    expected = "NVSwitch fabric state 'Completed'"
    if not known:
        return no_fabric_state(expected, (facts.get("topology") or {}).get("gpu_model"))
    bad = {g: s for g, s in known.items() if not s.startswith("Completed")}
    observed = ", ".join(f"{g} {s}" for g, s in list((bad or known).items())[:4])
    return VERDICTS.check(
        "fabric",
        not bad,
        expected=expected,
        observed=observed,
        reason_ok="the NVSwitch fabric is up on every GPU",
        reason_bad="the NVSwitch fabric is not up: start the fabric manager (`systemctl start "
        "nvidia-fabricmanager`, same version as the driver) and wait for 'Completed' before measuring",
    )
