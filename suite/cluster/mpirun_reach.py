"""Before any stage of a multi-node run over ssh: can node 0 log in to every other node *as mpirun will*?

mpirun (nccl-tests' MPI form, suite/cluster/mpirun.py) starts its daemons with `ssh … <node address>`: the
hostfile names each node by its node-to-node address, not by the name the run reached it at. A known_hosts
that knows the nodes by name only (the usual case: `ssh-keyscan gpu-b`, or the laptop's aliases) makes every
nccl-tests launch die on "Host key verification failed" after card time has started, though every other
check passed. So node 0 runs that very ssh, `true` on each other node's address, and a failure is one line
naming the node, the address, the command and the fix.
"""

from __future__ import annotations

import shlex
import subprocess
from typing import Sequence

from suite.cluster.mpirun import rsh_agent
from suite.cluster.multinode import Node, NodesError

SSH_TIMEOUT_S = 30.0


def mpirun_logins(
    nodes: Sequence[Node], addrs: Sequence[str], ssh_config: str = ""
) -> list[tuple[int, list[str]]]:
    """(node index, the ssh argv mpirun's daemon start would use) for each other node whose address differs
    from the name the run reaches it by (the same name is checked already: suite/cluster/nodecheck.py)."""
    if len(addrs) != len(nodes):
        return []
    agent = shlex.split(rsh_agent(nodes, ssh_config))
    return [
        (j, [*agent, addrs[j], "true"])
        for j in range(1, len(nodes))
        if addrs[j] and addrs[j] != nodes[j].host
    ]


def refusal(nodes: Sequence[Node], j: int, argv: list[str], said: str) -> str:
    addr = argv[-2]
    return (
        f"node {nodes[0].name} cannot log in to node {nodes[j].name} at {addr} as mpirun will "
        f"(`{shlex.join(argv)}`: {said}): mpirun starts nccl-tests' daemons this way. Add {addr}'s host key "
        f"to {nodes[0].name}'s known_hosts (`ssh-keyscan {addr} >> ~/.ssh/known_hosts`, after checking it), "
        f"or give `HostKeyAlias {nodes[j].host}` under `Host {addr}` in the ssh_config"
    )


def check_mpirun_reach(nodes: Sequence[Node], addrs: Sequence[str], ssh_config: str = "") -> None:
    """NodesError with the first node that mpirun's ssh cannot log in to; nothing when all can (or when
    mpirun could not be given one ssh for them all: suite/cluster/mpirun.py says so where it runs)."""
    try:
        logins = mpirun_logins(nodes, addrs, ssh_config)
    except NodesError:
        return
    for j, argv in logins:
        try:
            done = subprocess.run(
                argv, capture_output=True, text=True, timeout=SSH_TIMEOUT_S, stdin=subprocess.DEVNULL
            )
        except subprocess.TimeoutExpired:
            raise NodesError(refusal(nodes, j, argv, f"no answer within {SSH_TIMEOUT_S:.0f} s")) from None
        if done.returncode != 0:
            said = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
            raise NodesError(refusal(nodes, j, argv, said))
