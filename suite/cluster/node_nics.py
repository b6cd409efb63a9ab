"""Topology's network part on a multi-node run: every node's NICs, their port state and rate, compared.

On each node (suite/cluster/nodeprobe.py, run on every node at once by multilaunch.run_on_each_node): `ibstat`
(else `ibv_devinfo`, else /sys/class/infiniband) for InfiniBand and RoCE ports, kept untouched in
raw/topology/<node>/, and /sys/class/net for Ethernet: every interface with a device behind it (a physical
NIC, not a bridge or a veth) plus the one the run talks over (--socket-ifname), its operstate and `speed`
(Mb/s; the RoCE/TCP rate). Rows: case `<node>:<nic>` (an RDMA port is `mlx5_0/1`), metric `nic_rate` in Gb/s,
text the state.

The judgement is pure (`problems`): a node missing a NIC another node has, a port not up, or a NIC slower
than the same NIC on another node fails `topology.nics`, one line per problem naming the node.
Not a stage: the underscore keeps it out of discovery.
"""

from __future__ import annotations

import math
import shutil
import subprocess
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Iterable, Sequence

from suite.cluster.multinode import parse_nodes
from suite.parsers import ParseError
from suite.parsers.ibstat import parse_ibstat, parse_ibv_devinfo, port_from_sysfs
from suite.results import Row, Verdict
from suite.verdicts import verdicts_for

STAGE = "topology"
METRIC = "nic_rate"
UP_STATES = ("active", "up")
V = verdicts_for(STAGE)


@dataclass(frozen=True)
class Nic:
    name: str
    """`mlx5_0/1` (an RDMA device and port) or an interface name (`ens5`)."""
    kind: str
    """infiniband | roce | ethernet"""
    state: str
    """Active / Down / Polling… (RDMA) or the operstate (up / down / lowerlayerdown)."""
    rate_gbps: float | None
    detail: str = ""
    """The RDMA port's physical state (LinkUp, Polling, Disabled)."""

    @property
    def up(self) -> bool:
        # An interface whose driver reports no carrier state (operstate "unknown": lo, some virtual NICs)
        # passes.
        return self.state.lower() in UP_STATES or (
            self.kind == "ethernet" and self.state.lower() == "unknown"
        )


def nics_from_ports(parsed: dict) -> list[Nic]:
    """parse_ibstat / parse_ibv_devinfo's ports → one Nic per port."""
    out = []
    for p in parsed["ports"]:
        kind = "roce" if (p.get("link_layer") or "").lower() == "ethernet" else "infiniband"
        out.append(
            Nic(
                name=f"{p['ca']}/{p['port']}",
                kind=kind,
                state=p.get("state") or "unknown",
                rate_gbps=p.get("rate"),
                detail=p.get("physical_state") or "",
            )
        )
    return out


def with_sysfs_rate(nic: Nic, sys_root: Path) -> Nic:
    """An RDMA port the tool gave no rate (`ibv_devinfo` prints none; some `ibstat` builds none for RoCE)
    with the kernel's (/sys/class/infiniband/<ca>/ports/<port>/rate): without it the inter-node ceiling would
    fall back to the Ethernet beside the fabric."""
    if nic.rate_gbps or nic.kind == "ethernet":
        return nic
    ca, _, port = nic.name.partition("/")
    rate = port_from_sysfs(ca, 0, "", "", _read(sys_root / "infiniband" / ca / "ports" / port / "rate"), "")
    return replace(nic, rate_gbps=rate["rate"]) if rate["rate"] else nic


def nic_from_net(name: str, operstate: str, speed: str) -> Nic:
    """/sys/class/net/<name>/{operstate,speed} (speed in Mb/s; -1 or unreadable when the link has none)."""
    try:
        mbps = float(speed)
    except ValueError:
        mbps = -1.0
    return Nic(
        name=name,
        kind="ethernet",
        state=operstate.strip() or "unknown",
        rate_gbps=mbps / 1000 if mbps > 0 else None,
    )


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:  # `speed` of a link that is down raises EINVAL
        return ""


def local_nics(
    raw_dir: Path | None, ifnames: Sequence[str] = (), sys_root: Path = Path("/sys/class")
) -> tuple[list[Nic], list[str]]:
    """This node's NICs and what could not be read. The RDMA tool's output is kept in raw_dir (when given)."""
    nics: list[Nic] = []
    errors: list[str] = []
    for tool, parse in (("ibstat", parse_ibstat), ("ibv_devinfo", parse_ibv_devinfo)):
        if shutil.which(tool) is None:
            continue
        done = subprocess.run([tool], capture_output=True, text=True, timeout=60)
        if raw_dir is not None:
            (raw_dir / f"{tool}.txt").write_text(done.stdout + done.stderr)
        try:
            parsed = parse(done.stdout)
        except ParseError as e:
            if done.stdout.strip():
                errors.append(f"{tool}: {e}")
            continue
        nics += [with_sysfs_rate(n, sys_root) for n in nics_from_ports(parsed)]
        errors += [f"{tool}: {line}" for line in parsed["errors"]]
        break
    else:  # no RDMA tool installed: the kernel's own view
        ib = sys_root / "infiniband"
        for port_dir in sorted(ib.glob("*/ports/*")):
            ca = port_dir.parent.parent.name
            nics += nics_from_ports(
                {
                    "ports": [
                        port_from_sysfs(
                            ca,
                            int(port_dir.name),
                            _read(port_dir / "state"),
                            _read(port_dir / "phys_state"),
                            _read(port_dir / "rate"),
                            _read(port_dir / "link_layer"),
                        )
                    ]
                }
            )
    here = interfaces_here()  # this network namespace's, whatever /sys was mounted for
    for dev in sorted((sys_root / "net").glob("*")):
        if here is not None and dev.name not in here:
            continue  # a /sys of another network namespace (a container's, nsenter's): not this node's
        if dev.name in ifnames or ((dev / "device").exists() and not (dev / "bridge").exists()):
            nics.append(nic_from_net(dev.name, _read(dev / "operstate"), _read(dev / "speed")))
    for name in ifnames:
        if (sys_root / "net" / name).exists() and (here is None or name in here):
            continue
        if here is not None and name in here:  # no sysfs view: the state from netlink, the rate unknown
            nics.append(
                Nic(name, "ethernet", ip_link_state(name), None, "no /sys of this namespace: rate unknown")
            )
        else:
            errors.append(f"interface {name} (--socket-ifname) does not exist here")
    return nics, errors


def interfaces_here(proc_net_dev: Path = Path("/proc/net/dev")) -> set[str] | None:
    """The interfaces of this process's network namespace (/proc/net/dev follows it; /sys may not); None
    unreadable."""
    try:
        lines = proc_net_dev.read_text().splitlines()[2:]
    except OSError:
        return None
    return {line.split(":", 1)[0].strip() for line in lines if ":" in line}


def ip_link_state(name: str) -> str:
    """`ip -o link show dev NAME`'s state (UP → up), 'unknown' without iproute2."""
    try:
        done = subprocess.run(
            ["ip", "-o", "link", "show", "dev", name], capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    words = done.stdout.split()
    return words[words.index("state") + 1].lower() if "state" in words[:-1] else "unknown"


def rows_for(node: str, nics: Iterable[Nic], errors: Iterable[str]) -> list[Row]:
    rows = [
        Row(
            stage=STAGE,
            case=f"{node}:{n.name}",
            metric=METRIC,
            unit="Gb/s",
            source=n.kind,
            value=math.nan if n.rate_gbps is None else n.rate_gbps,
            text=n.state + (f" ({n.detail})" if n.detail else ""),
        )
        for n in nics
    ]
    rows += [
        Row(stage=STAGE, case=f"{node}:error", metric="nic_error", value=math.nan, unit="", text=e)
        for e in errors
    ]
    # One row even for a node without NICs, so that "reported nothing" and "has none" differ.
    return rows + [Row(stage=STAGE, case=f"{node}:", metric="nic_count", value=len(list(nics)), unit="count")]


def from_rows(rows: Iterable[Row]) -> tuple[dict[str, list[Nic]], dict[str, list[str]]]:
    """rows_for's rows (every node's) → NICs and errors per node; a node appears once it sent its count."""
    per_node: dict[str, list[Nic]] = {}
    errors: dict[str, list[str]] = {}
    rows = list(rows)
    for r in rows:
        if r.stage == STAGE and r.metric == "nic_count":
            per_node.setdefault(r.case.rsplit(":", 1)[0], [])
    for r in rows:
        node, _, name = r.case.rpartition(":")
        if r.metric == METRIC and node in per_node:
            state, _, detail = (r.text or "").partition(" (")
            rate = None if r.value is None or math.isnan(r.value) else float(r.value)
            per_node[node].append(Nic(name, r.source or "", state, rate, detail.rstrip(")")))
        elif r.metric == "nic_error":
            errors.setdefault(node, []).append(r.text or "")
    return per_node, errors


def problems(
    per_node: dict[str, list[Nic]], errors: dict[str, list[str]], expected_nodes: Sequence[str] = ()
) -> list[str]:
    """One line per problem, naming the node: no report, a read error, a NIC another node has and this one
    lacks, a port not up, a rate below the same NIC's on another node."""
    out = [
        f"node {n}: reported no NICs (its topology worker did not run: see raw/topology/{n}/)"
        for n in expected_nodes
        if n not in per_node
    ]
    for node, lines in errors.items():
        out += [f"node {node}: {line}" for line in lines]
    names = {node: {n.name: n for n in nics} for node, nics in per_node.items()}
    for node, mine in names.items():
        for other, theirs in names.items():
            lacking = sorted(set(theirs) - set(mine))
            if other != node and lacking:
                out.append(
                    f"node {node}: no {', '.join(lacking)}, which node {other} has: the node was rented "
                    "with fewer NICs or a driver did not load (ibstat / ip link there)"
                )
                break
        for nic in mine.values():
            if not nic.up:
                out.append(
                    f"node {node}: {nic.name} is {nic.state}{f' ({nic.detail})' if nic.detail else ''}: "
                    "reseat or replace its cable, or ask the provider to fix the port"
                )
                continue
            best = max(
                (
                    (theirs[nic.name].rate_gbps, other)
                    for other, theirs in names.items()
                    if nic.name in theirs and theirs[nic.name].up and theirs[nic.name].rate_gbps
                ),
                default=None,
            )
            if best and nic.rate_gbps and nic.rate_gbps < best[0]:
                out.append(
                    f"node {node}: {nic.name} at {nic.rate_gbps:g} Gb/s where node {best[1]} has "
                    f"{best[0]:g} Gb/s: the link trained down (cable, switch port or speed setting)"
                )
    return out


PROBE_S = 5.0  # an ssh to each node (at once) and a Python without torch reading sysfs and ibstat


def line_rates(rows: Iterable[Row]) -> dict[str, float]:
    """Each node's fastest port that is up, Gb/s: its RDMA ports' when it has any (the management Ethernet
    beside an InfiniBand fabric is not what NCCL uses), else its Ethernet's. The inter-node pairs are held to
    the slower of their two nodes' (bandwidth's p2p_line_rate); a node with no known rate is left out."""
    return {node: max(n.rate_gbps for n in nics) for node, nics in _fabric_ports(rows).items()}


def nic_totals(rows: Iterable[Row]) -> dict[str, dict[str, float]]:
    """Each node's compute fabric: its line rate (line_rates'), how many up ports run at it and their sum,
    Gb/s. Slower ports beside them (the 4 × 100 Gb/s front-end ports of an H100 node with 8 × 400 Gb/s for its
    GPUs) are storage or management, not NCCL's. The sum, line rate × NICs per node, is what one node can push
    to the others at once: the inter-node busbw ceiling (bandwidth's inter-node floor)."""
    out = {}
    for node, nics in _fabric_ports(rows).items():
        line = max(n.rate_gbps for n in nics)
        count = sum(1 for n in nics if n.rate_gbps == line)
        out[node] = {"nics": count, "line_gbps": line, "total_gbps": count * line}
    return out


def rdma_ports(rows: Iterable[Row]) -> dict[str, list[str]]:
    """node → its RDMA ports that are up ('mlx5_0/1 infiniband 400 Gb/s'), [] for a node with none: where NCCL
    then uses sockets, the fabric carried nothing (bandwidth's inter_transport)."""
    per_node, _ = from_rows(rows)
    return {
        node: [
            f"{n.name} {n.kind}" + (f" {n.rate_gbps:g} Gb/s" if n.rate_gbps else "")
            for n in nics
            if n.up and n.kind != "ethernet"
        ]
        for node, nics in per_node.items()
    }


def _fabric_ports(rows: Iterable[Row]) -> dict[str, list[Nic]]:
    """node → its up ports with a known rate, its RDMA ones when it has any (the management Ethernet beside an
    InfiniBand fabric is not what NCCL uses), else its Ethernet ones; a node with none is left out."""
    per_node, _ = from_rows(rows)
    out: dict[str, list[Nic]] = {}
    for node, nics in per_node.items():
        up = [n for n in nics if n.up and n.rate_gbps]
        rdma = [n for n in up if n.kind != "ethernet"]
        if rdma or up:
            out[node] = rdma or up
    return out


def estimate_s(p) -> float:
    """`make plan`'s seconds (p: suite.plan.hours.PlanInputs): the probe on every node at once; 0 on one
    node."""
    return PROBE_S if p.assume.nodes > 1 else 0.0


ROWS_FILE = "nic-rows.jsonl"


def talked_over(socket_ifname: str, env) -> list[str]:
    """The interfaces the run talks over: --socket-ifname, else those NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME
    name outright (NCCL's `^exclude` and `=exact` forms and prefixes it matches are left to it)."""
    text = socket_ifname or env.get("NCCL_SOCKET_IFNAME") or env.get("GLOO_SOCKET_IFNAME") or ""
    return [n for n in (part.strip() for part in text.split(",")) if n and n[0] not in "^="]


def measure(ctx) -> list[Row]:
    """The probe (`python -m suite.cluster.nodeprobe`: local_nics, no torch) once on every node of a
    multi-node profile, at once; each node's rows read back from raw/topology/<node>/nic-rows.jsonl (a node
    whose probe did not run has none: it "reported no NICs")."""
    import os
    import sys

    from suite.cluster.multilaunch import run_on_each_node
    from suite.results import read_rows_jsonl

    ctx.say(f"NICs on every one of {len(ctx.profile.nodes)} nodes")
    names = talked_over(ctx.profile.socket_ifname, os.environ)
    argv = [
        sys.executable,
        "-m",
        "suite.cluster.nodeprobe",
        *(["--ifname", ",".join(names)] if names else []),
    ]
    run_on_each_node(ctx.profile, argv, raw_dir=ctx.raw_dir, log_name="nics.log")
    rows: list[Row] = []
    for path in sorted(ctx.raw_dir.glob(f"*/{ROWS_FILE}")):
        rows += read_rows_jsonl(path)
    return rows


def judge(rows: list[Row], node_entries: Sequence[str]) -> list[Verdict]:
    """`topology.nics` on a multi-node run (none on one node); node_entries: the profile's nodes."""
    if len(node_entries) < 2:
        return []
    expected_nodes = [n.name for n in parse_nodes(node_entries)]
    per_node, errors = from_rows(rows)
    found = problems(per_node, errors, expected_nodes)
    counts = sorted({len(v) for v in per_node.values()})
    return [
        V.check(
            "nics",
            not found,
            expected="every node: the NICs the others have, every port up, at the rate the others have",
            observed="; ".join(found) or f"{len(per_node)} nodes × {'/'.join(map(str, counts))} NICs, all up",
            reason_ok="the nodes' networks match",
            reason_bad="a node's network differs: the inter-node bandwidth is held to its slowest NIC",
        )
    ]
