"""Before any stage of `python -m suite run --nodes …`: what would otherwise fail the first launch after card
time has started, refused in one line naming the node and the fix:

  * a node that does not answer over ssh (multilaunch.check_reachable);

  * a fixed rendezvous port (--master-port) already held on the first node, which hosts c10d's store;
  * on a GPU profile, a node whose `nvidia-smi -L` lists another number of GPUs than the first node's: one
    torchrun per node with the same --nproc-per-node would leave GPUs idle or fail to start.
"""

from __future__ import annotations

import subprocess
from typing import Sequence

from suite.cluster.multinode import Node, NodesError
from suite.launch.torchrun import port_holder, port_is_free

SMI_TIMEOUT_S = 60.0


def rendezvous_port_problem(first: str, port: int | None) -> str | None:
    """None when no fixed port was asked for or it is free on every address of this (the first) node."""
    if port is None or port_is_free(port, "0.0.0.0"):
        return None
    holder = port_holder(port)
    return (
        f"node {first}: the rendezvous port {port} is taken{' by ' + holder if holder else ''}: stop that, "
        f"or "
        "pass another --master-port (or none: each launch then picks a free one)"
    )


def gpu_lines(smi_list: str) -> int:
    """`nvidia-smi -L` output → the number of GPUs it lists (its `GPU N: …` lines; MIG lines are indented)."""
    return sum(1 for line in smi_list.splitlines() if line.startswith("GPU "))


def gpu_count_problems(counts: dict[str, int], first: str) -> list[str]:
    """One line per node whose GPU count differs from the first node's."""
    mine = counts[first]
    return [
        f"node {name}: {count} GPUs where {first} has {mine}: rent nodes of one shape, or leave it out of "
        f"--nodes"
        for name, count in counts.items()
        if name != first and count != mine
    ]


def node_gpu_count(node: Node | None, ssh_config: str) -> tuple[int | None, str]:
    """(GPUs `nvidia-smi -L` lists on `node` — None: this node — or None, and why it could not tell)."""
    argv = ["nvidia-smi", "-L"] if node is None else node.ssh_argv(ssh_config) + ["nvidia-smi -L"]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=SMI_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, str(e)
    if done.returncode != 0:
        return None, ((done.stderr or done.stdout).strip().splitlines() or [f"exit code {done.returncode}"])[
            -1
        ]
    return gpu_lines(done.stdout), ""


def check_nodes(nodes: Sequence[Node], ssh_config: str = "", *, gpus: bool, master_port: int | None) -> None:
    """NodesError with the first problem; nothing when the nodes can start a launch. This node's port first
    (no ssh), then every other node over ssh (multilaunch.check_reachable), then their GPUs."""
    from suite.cluster.multilaunch import check_reachable

    problem = rendezvous_port_problem(nodes[0].name, master_port)
    if problem:
        raise NodesError(problem)
    check_reachable(nodes, ssh_config)
    if not gpus:
        return
    counts: dict[str, int] = {}
    for i, node in enumerate(nodes):
        count, why = node_gpu_count(None if i == 0 else node, ssh_config)
        if count is None:
            raise NodesError(
                f"node {node.name}: nvidia-smi -L failed ({why}): install the NVIDIA driver there, or "
                "leave the node out of --nodes"
            )
        counts[node.name] = count
    problems = gpu_count_problems(counts, nodes[0].name)
    if problems:
        raise NodesError(problems[0])
