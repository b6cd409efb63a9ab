"""`make remote HOSTS=a,b` / `HOSTFILE=`: the nodes of a multi-node run, checked before any card time is
spent.

    python -m provisioning remote --hosts root@gpu-a,root@gpu-b:2222 --profile nccl-gpu

Every node is reached and probed (preflight.py's probe, the same as one host's) and each must pass on its
own; then the nodes must agree with the first: the same number of GPUs of the same model, the same driver,
the same Python minor version. Anything else is refused in one line naming the node, what differs and the
fix, e.g.

    node root@gpu-b: 4 GPUs where root@gpu-a has 8: rent nodes of one shape, or list only the matching ones

The comparison and the list's checks are pure (tests/unit/test_cluster_preflight.py); the probing (one SSH
round trip per node) and the run itself are provisioning/group.py's and drive.py's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from provisioning.session import preflight
from provisioning.session.hosts import HostSpec, HostSpecError, parse_host
from provisioning.session.shell import join
from suite.cluster.multinode import Node, NodesError, hostfile_nodes
from suite.regular_files import not_regular_problem

SSH_CONNECT_TIMEOUT_S = 10


def reach_argv(node: Node, ssh_config: str) -> list[str]:
    """ssh from the first node to `node`, never prompting (a missing key or host key fails at once)."""
    argv = node.ssh_argv(ssh_config)
    return argv[:1] + ["-o", f"ConnectTimeout={SSH_CONNECT_TIMEOUT_S}"] + argv[1:]


def on_node(node: Node | None, argv: list[str], ssh_config: str) -> str:
    """A POSIX command line running `argv` on the first node itself (node None) or on `node` over ssh from
    it."""
    if node is None:
        return join(argv)
    return join([*reach_argv(node, ssh_config), join(argv)])


class ClusterError(ValueError):
    """A node list or a node that cannot take part; the message is the one line to print."""


def cluster_hosts(hosts: str = "", hostfile: str = "") -> tuple[HostSpec, ...]:
    """HOSTS=a,b or HOSTFILE=path → the nodes in order; a typo, an empty entry or a node named twice
    refused."""
    if hosts and hostfile:
        raise ClusterError("HOSTS= and HOSTFILE= both name the nodes: give one")
    if hostfile:
        path = Path(hostfile)
        if problem := not_regular_problem(path):  # a FIFO would block the read, a folder is no list
            raise ClusterError(f"HOSTFILE={hostfile}: {problem}")
        if not path.is_file():
            raise ClusterError(f"HOSTFILE={hostfile}: no such file: write one node a line (user@host[:port])")
        try:
            entries = list(hostfile_nodes(path.read_bytes(), f"HOSTFILE {hostfile}"))
        except NodesError as e:
            raise ClusterError(str(e)) from None
    else:
        entries = hosts.split(",")
    out: list[HostSpec] = []
    for i, entry in enumerate(entries, 1):
        if not entry.strip():
            raise ClusterError(f"HOSTS entry {i} is empty (a stray comma?): write HOSTS=user@a,user@b")
        try:
            out.append(parse_host(entry))
        except HostSpecError as e:
            raise ClusterError(f"HOSTS entry {i}: {e}") from None
    seen: dict[tuple[str, int | None], str] = {}
    for spec in out:
        where = (spec.host, spec.port)
        if where in seen:
            raise ClusterError(
                f"node {spec.label} is listed twice (also as {seen[where]}): name each node once"
            )
        seen[where] = spec.label
    return tuple(out)


@dataclass(frozen=True)
class NodeShape:
    """What the nodes of one run must share."""

    gpus: int
    model: str
    driver: str
    python: str

    @classmethod
    def of(cls, facts: preflight.HostFacts) -> "NodeShape":
        models = sorted({gpu_model(line) for line in facts.gpus})
        return cls(
            gpus=len(facts.gpus),
            model=" + ".join(models) or "no GPU",
            driver=facts.driver or "none",
            python=".".join(map(str, (facts.python or ())[:2])) or "none",
        )


def gpu_model(smi_line: str) -> str:
    """'GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-…)' → 'NVIDIA H100 80GB HBM3'."""
    return re.sub(r"^\s*GPU \d+:\s*|\s*\(UUID:.*$", "", smi_line).strip()


# What the nodes must share, in the order it is checked: (NodeShape field, how a value reads, the fix).
AGREEMENT = (
    ("gpus", "{} GPUs", "rent nodes of one shape, or list only the matching ones in HOSTS="),
    ("model", "{}", "one run measures one GPU model; list only the matching nodes in HOSTS="),
    (
        "driver",
        "driver {}",
        "install the same driver on every node (NCCL across versions is not what the run should measure)",
    ),
    (
        "python",
        "Python {}",
        "the same venv must run on every node; install the same Python, or use RUNTIME=docker",
    ),
)


def cluster_problems(nodes: list[tuple[str, preflight.HostFacts]], runtime: str = "host") -> list[str]:
    """One line per node that differs from the first (its first difference), naming it and the fix; [] when
    they agree. With RUNTIME=docker the hosts' Pythons do not matter: every node runs the image's."""
    if len(nodes) < 2:
        return []
    first_label, first = nodes[0][0], NodeShape.of(nodes[0][1])
    out = []
    for label, facts in nodes[1:]:
        shape = NodeShape.of(facts)
        for field, reads, fix in AGREEMENT:
            if field == "python" and runtime == "docker":
                continue
            mine, theirs = getattr(shape, field), getattr(first, field)
            if mine != theirs:
                out.append(f"node {label}: {reads.format(mine)} where {first_label} has {theirs}: {fix}")
                break
    return out
