"""Inside a Slurm allocation: each node's node-to-node address, and the rendezvous port tried from every node.

The suite runs on the allocation's first node and starts each launch as one srun, the same argv on every node
(suite/cluster/slurm.py). What differs per node — whether it hosts c10d's store (`is_host`) and the address it
announces (`--local-addr`) — is filled in on the node by srun's per-node shell, from a `name=address,…` list
whose first entry is the host (node_plan). The addresses: --node-addrs (make slurm NODE_ADDRS=) where given,
else each node's NodeAddr as slurmctld has it (the address Slurm itself reaches the node at; NodeName where
none is set).

Before any stage, this node listens on the rendezvous port and on a port its kernel picks, and one srun task
per node connects to the first node's address at both (CONNECT_PY, suite/cluster/node_ports.py): an address
that does not answer or a firewall closed to either is refused in one line naming the node, the address, the
port and what to open — not a join timeout, or a first collective that hangs, after card time has started.
(No ssh runs between compute nodes under Slurm: ssh's port is not tried.)
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from typing import Mapping, Sequence

from suite.cluster.multinode import Node, NodesError
from suite.cluster.node_ports import CONNECT_PY, CONNECT_TIMEOUT_S, listening, parse_connect_lines, refusal

SCONTROL_TIMEOUT_S = 30.0
# On each node of the srun: CONNECT_PY's lines, each after the node's name.
_CONNECT_ON_NODE = (
    'node=${SLURMD_NODENAME:-$(hostname)}; python3 -c "$0" "$@" 2>&1 | '
    'while IFS= read -r line; do printf "%s %s\\n" "$node" "$line"; done'
)


def parse_node_addrs_shown(shown: str) -> dict[str, str]:
    """`scontrol -o show node` → {NodeName: NodeAddr} (one line per node; NodeAddr absent: the name)."""
    out = {}
    for line in shown.splitlines():
        fields = dict(re.findall(r"(\w+)=(\S*)", line))
        if fields.get("NodeName"):
            out[fields["NodeName"]] = fields.get("NodeAddr") or fields["NodeName"]
    return out


def slurm_node_addrs(names: Sequence[str], env: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """Each node's NodeAddr from slurmctld, in `names`' order; a node it does not list keeps its name."""
    try:
        done = subprocess.run(
            ["scontrol", "-o", "show", "node", ",".join(names)],
            capture_output=True,
            text=True,
            timeout=SCONTROL_TIMEOUT_S,
            env=None if env is None else dict(env),
        )
        shown = parse_node_addrs_shown(done.stdout) if done.returncode == 0 else {}
    except (OSError, subprocess.TimeoutExpired):
        shown = {}
    return tuple(shown.get(name, name) for name in names)


def node_plan(nodes: Sequence[Node], addrs: Sequence[str]) -> str:
    """srun's per-node shell reads this: `name=address` per node, the first the store's host."""
    return ",".join(f"{node.name}={addr or node.name}" for node, addr in zip(nodes, addrs))


def connect_argv(
    nnodes: int, target: str, srun_args: Sequence[str] = (), also: Sequence[str] = ()
) -> list[str]:
    """One srun task per node, each connecting to `target` (host:port), then to each of `also`, and saying so
    after its name."""
    return [
        "srun",
        f"--nodes={nnodes}",
        f"--ntasks={nnodes}",
        "--ntasks-per-node=1",
        "--kill-on-bad-exit=0",
        "--export=ALL",
        *srun_args,
        "sh",
        "-c",
        _CONNECT_ON_NODE,
        CONNECT_PY,
        target,
        *also,
    ]


def results_by_target(said: str) -> dict[str, dict[str, str]]:
    """connect_argv's output → {node: {host:port: '' (connected) or why not}}; lines of srun's own are
    ignored."""
    out: dict[str, dict[str, str]] = {}
    for line in said.splitlines():
        node, _, rest = line.partition(" ")
        parsed = parse_connect_lines(rest)
        if parsed:
            out.setdefault(node, {}).update(parsed)
    return out


def check_slurm_network(
    nodes: Sequence[Node], addrs: Sequence[str], port: int, srun_args: Sequence[str] = ()
) -> None:
    """NodesError naming the first node that cannot reach the first node's address and port (the other nodes'
    answers first: what a firewall closes; then the first node's own, a wrong address for it). This process
    must be that first node (the batch script runs on it) and listens meanwhile on the rendezvous port and on
    a port its kernel picks (suite/cluster/node_ports.py `listening`)."""
    target = f"{addrs[0]}:{port}"
    with listening(port, f"node {nodes[0].name}") as picked:
        try:
            done = subprocess.run(
                connect_argv(len(nodes), target, srun_args, also=[f"{addrs[0]}:{picked}"]),
                capture_output=True,
                text=True,
                timeout=2 * CONNECT_TIMEOUT_S + 120,
            )
            said, results = done.stdout + done.stderr, results_by_target(done.stdout)
        except subprocess.TimeoutExpired:
            said, results = "srun did not end within its time", {}
    for i in [*range(1, len(nodes)), 0]:
        tried = results.get(nodes[i].name, None)
        if tried is None:
            last = (said.strip().splitlines() or ["no output"])[-1]
            raise NodesError(
                f"node {nodes[i].name} did not answer the rendezvous check through srun ({last}): is it "
                f"up in the allocation? `{shlex.join(connect_argv(len(nodes), target))}` shows why"
            )
        for p in (port, picked):
            why = tried.get(f"{addrs[0]}:{p}", "not tried")
            if why:
                raise NodesError(refusal(nodes, i, 0, addrs[0], p, why, port, picked))


def on_first_node(nodes: Sequence[Node], env: Mapping[str, str]) -> bool:
    """Whether this process runs on the allocation's first node (the batch script does; salloc's shell on a
    login node does not, and a listener there would not be where the store will be)."""
    return env.get("SLURMD_NODENAME") == nodes[0].name


def slurm_network(
    nodes: Sequence[Node], given: Sequence[str], master_port: int | None, srun_args: Sequence[str] = ()
) -> tuple[tuple[str, ...], int]:
    """The allocation's node addresses (given: checked; else slurmctld's NodeAddr) and the fixed rendezvous
    port, the port tried from every node (check_slurm_network) before any stage when this is the first
    node."""
    from suite.cluster.node_addrs import parse_node_addrs, rendezvous_port

    addrs = parse_node_addrs(list(given), nodes) if given else slurm_node_addrs([n.name for n in nodes])
    port = rendezvous_port(master_port)
    if on_first_node(nodes, os.environ):
        check_slurm_network(nodes, addrs, port, srun_args)
    return addrs, port
