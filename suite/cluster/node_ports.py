"""Before any stage of a multi-node run: can every node open the connections the run will need?

A firewall that lets the laptop reach port 22 only, or a security group open to ssh alone, lets the
preflight's ssh through and then makes every launch wait out the rendezvous' join timeout after card time has
started. So, with the node addresses and the fixed rendezvous port known (suite/cluster/node_addrs.py), node 0
listens on that port for a moment and every node connects, from where the run will connect from:

  * every other node → node 0's node address : the rendezvous port (c10d's store, hosted on node 0);
  * every other node → node 0's node address : a port the kernel picks (node 0 listens on port 0), as gloo's
    and NCCL's own sockets after the rendezvous do: a firewall open to 22 and the rendezvous port alone lets
    the rendezvous through and then hangs the first collective;
  * every node → every other node's node address : 22 (the run's ssh to the nodes, mpirun's daemons).

The first connection that fails is refused in one line: the node it came from, the address and port it could
not reach, what was said, and which ports to open. One picked port stands for the range the libraries pick
from (node 0's ip_local_port_range): it cannot prove every port of it open, but a closed range shows here.
"""

from __future__ import annotations

import contextlib
import shlex
import socket
import subprocess
from typing import Iterator, Sequence

from suite.cluster.multinode import Node, NodesError
from suite.cluster.node_addrs import bind_rendezvous_port

CONNECT_TIMEOUT_S = 5.0
# On a node: try each host:port given, one line each ("ok host:port" / "fail host:port why").
CONNECT_PY = (
    "import socket, sys\n"
    "for target in sys.argv[1:]:\n"
    "    host, port = target.rsplit(':', 1)\n"
    "    try:\n"
    f"        socket.create_connection((host, int(port)), timeout={CONNECT_TIMEOUT_S}).close()\n"
    "        print('ok', target, flush=True)\n"
    "    except OSError as e:\n"
    "        print('fail', target, str(e) or type(e).__name__, flush=True)\n"
)


def ssh_port(node: Node) -> int:
    return node.port or 22


def targets_of(
    i: int, nodes: Sequence[Node], addrs: Sequence[str], port: int, picked: int | None = None
) -> list[tuple[int, str, int]]:
    """What node i must reach: (node index, address, port), node 0's rendezvous port first, then the port
    node 0's kernel picked (`picked`), then ssh."""
    out = ([(0, addrs[0], port)] + ([(0, addrs[0], picked)] if picked else [])) if i else []
    return out + [(j, addrs[j], ssh_port(nodes[j])) for j in range(len(nodes)) if j != i]


def port_range(path: str = "/proc/sys/net/ipv4/ip_local_port_range") -> str:
    """The ports this kernel picks from ('32768–60999'), where it says."""
    try:
        low, high = open(path).read().split()
    except (OSError, ValueError):
        return "the ephemeral range"
    return f"{low}–{high}"


def parse_connect_lines(said: str) -> dict[str, str]:
    """CONNECT_PY's output → {'host:port': '' (connected) or why not}."""
    out = {}
    for line in said.splitlines():
        verdict, _, rest = line.partition(" ")
        target, _, why = rest.partition(" ")
        if verdict in ("ok", "fail") and target:
            out[target] = "" if verdict == "ok" else (why or "failed")
    return out


def refusal(
    nodes: Sequence[Node],
    src: int,
    dst: int,
    addr: str,
    port: int,
    why: str,
    rdzv_port: int,
    picked: int | None = None,
) -> str:
    """The one line naming the node, the address and port, and what to open."""
    if dst == 0 and port == picked:
        return (
            f"node {nodes[src].name} cannot connect to node {nodes[dst].name} at {addr}:{port}, a port the "
            f"kernel picked as gloo's and NCCL's sockets use after the rendezvous ({why}): open TCP between "
            f"the nodes' addresses on every port, not only 22 and {rdzv_port} (here {port_range()}; on a "
            f"cloud, a security-group rule allowing all traffic from the group itself)"
        )
    what = "the rendezvous port (c10d's store on node 0)" if dst == 0 and port == rdzv_port else "ssh"
    fix = (
        f"check that {addr} is {nodes[dst].name}'s address toward the other nodes (else pass NODE_ADDRS=) "
        f"and "
        f"open TCP {port} on it to them (its firewall, the security group)"
        + ("" if what == "ssh" else ", or pass MASTER_PORT= with a port that is open")
    )
    return (
        f"node {nodes[src].name} cannot connect to node {nodes[dst].name} at {addr}:{port}, {what} "
        f"({why}): {fix}"
    )


def connect_here(targets: Sequence[tuple[int, str, int]]) -> dict[str, str]:
    return parse_connect_lines(
        subprocess.run(
            ["python3", "-c", CONNECT_PY, *(f"{a}:{p}" for _, a, p in targets)],
            capture_output=True,
            text=True,
            timeout=CONNECT_TIMEOUT_S * len(targets) + 30,
        ).stdout
    )


def connect_from(
    node: Node, targets: Sequence[tuple[int, str, int]], ssh_config: str
) -> tuple[dict[str, str], str]:
    """CONNECT_PY run on `node` over ssh: its results, and what ssh said when there are none."""
    remote = shlex.join(["python3", "-c", CONNECT_PY, *(f"{a}:{p}" for _, a, p in targets)])
    try:
        done = subprocess.run(
            node.ssh_argv(ssh_config) + [remote],
            capture_output=True,
            text=True,
            timeout=CONNECT_TIMEOUT_S * len(targets) + 30,
        )
    except subprocess.TimeoutExpired:
        return {}, "no answer over ssh"
    return parse_connect_lines(done.stdout), (
        done.stderr.strip().splitlines() or [f"exit {done.returncode}"]
    )[-1]


@contextlib.contextmanager
def listening(port: int, node: str) -> Iterator[int]:
    """This node listening, for the checks' moment, on the rendezvous port (bound as c10d's store binds it,
    suite/cluster/node_addrs.py) and on a port its kernel picks (as gloo's and NCCL's sockets do): the picked
    port. The kernel completes connections without an accept."""
    with bind_rendezvous_port(port, node) as listener, socket.create_server(("", 0), backlog=64) as picked:
        listener.listen(64)
        yield picked.getsockname()[1]


def check_node_network(nodes: Sequence[Node], addrs: Sequence[str], port: int, ssh_config: str = "") -> None:
    """NodesError with the first connection that fails; this process is node 0 and listens meanwhile
    (`listening`)."""
    with listening(port, f"node {nodes[0].name}") as picked:
        for i, node in enumerate(nodes):
            targets = targets_of(i, nodes, addrs, port, picked)
            if i == 0:
                results, said = connect_here(targets), "python3 failed"
            else:
                results, said = connect_from(node, targets, ssh_config)
            for dst, addr, p in targets:
                why = results.get(f"{addr}:{p}", f"not tried: {said}")
                if why:
                    raise NodesError(refusal(nodes, i, dst, addr, p, why, port, picked))
