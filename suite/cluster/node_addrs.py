"""Where the nodes of a multi-node run reach each other: one node-to-node address per node, and the fixed
port.

The name a node is reached by from the laptop (HOSTS=, --nodes) is often not the address the nodes use between
themselves: a cloud's public address is NAT'd to a private one, a second NIC carries the traffic, a host name
resolves to 127.0.1.1. So the rendezvous endpoint is node 0's *node address*, each node's torchrun announces
its own (`--local-addr`), and node 0 hosts the store because it is told so (`is_host`), not because its host
name happens to match the endpoint.

    --node-addrs 10.0.0.11,10.0.0.12     (make remote NODE_ADDRS=…; or a hostfile's `addr=` column)

Without them each node is asked: node 0 the source address of its route toward node 1 (`ip route get`), every
other node the source address of its route toward node 0's. The rendezvous port is fixed (DEFAULT_RDZV_PORT
unless --master-port says otherwise) so that a firewall can be opened for it before the run.
"""

from __future__ import annotations

import ipaddress
import re
import shlex
import socket
import subprocess
from typing import Sequence

from suite.cluster.multinode import HOST_RE, Node, NodesError

DEFAULT_RDZV_PORT = 29400  # c10d's own default; the README names it as the one port to open between the nodes
ASK_TIMEOUT_S = 30.0
# On a node: the source address of its route toward $1 — `ip route get`, else Python's connected-UDP trick
# (a connect() on a datagram socket sends nothing: the kernel only picks the route and the source address).
ROUTE_SOURCE_SH = (
    'ip -o route get "$1" 2>/dev/null | sed -n "s/.* src \\([^ ]*\\).*/\\1/p" | grep . || '
    'python3 -c "import socket,sys; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); '
    's.connect((sys.argv[1], 9)); print(s.getsockname()[0])" "$1"'
)


def parse_node_addrs(text: str | Sequence[str], nodes: Sequence[Node]) -> tuple[str, ...]:
    """'10.0.0.1,10.0.0.2' → one address per node, in the nodes' order; a count that differs, an empty entry
    or a loopback address (no other node can reach it) is refused naming the entry."""
    entries = [e.strip() for e in (text.split(",") if isinstance(text, str) else text)]
    if len(entries) != len(nodes):
        raise NodesError(
            f"{len(entries)} node addresses for {len(nodes)} nodes: give one per node, in the nodes' "
            "order (NODE_ADDRS=addr-of-node-0,addr-of-node-1,…)"
        )
    for node, addr in zip(nodes, entries):
        if not HOST_RE.match(addr):
            raise NodesError(
                f"node {node.name}: node address {addr!r} is not a host name or address: write "
                "NODE_ADDRS=10.0.0.1,10.0.0.2"
            )
        if is_loopback(addr):
            raise NodesError(
                f"node {node.name}: node address {addr} is a loopback address no other node reaches: "
                "give the address of its interface toward the other nodes"
            )
    return tuple(entries)


def is_loopback(addr: str) -> bool:
    try:
        return ipaddress.ip_address(addr).is_loopback
    except ValueError:
        return addr == "localhost"


def route_source(said: str) -> str | None:
    """ROUTE_SOURCE_SH's output → the address, or None when it printed none."""
    words = said.strip().split()
    if not words:
        return None
    try:
        return str(ipaddress.ip_address(words[-1]))
    except ValueError:
        return None


def ssh_hostname(node: Node, ssh_config: str) -> str:
    """The host ssh would dial for `node` (its ssh_config's HostName, else the name itself): `ssh -G`."""
    argv = ["ssh", "-G"] + (["-F", ssh_config] if ssh_config else []) + [node.destination]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=ASK_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return node.host
    found = re.search(r"^hostname (\S+)$", done.stdout, re.MULTILINE)
    return found.group(1) if done.returncode == 0 and found else node.host


def resolve(host: str) -> str:
    """An IPv4 address for `host` on this node, or NodesError naming it."""
    try:
        return socket.getaddrinfo(host, None, socket.AF_INET)[0][4][0]
    except (OSError, IndexError) as e:
        raise NodesError(
            f"{host} does not resolve on this node ({e}): pass NODE_ADDRS= (--node-addrs)"
        ) from None


def local_route_source(target: str) -> str:
    """This node's source address toward `target` (an address)."""
    done = subprocess.run(
        ["sh", "-c", ROUTE_SOURCE_SH, "sh", target], capture_output=True, text=True, timeout=ASK_TIMEOUT_S
    )
    found = route_source(done.stdout)
    if not found:
        raise NodesError(f"this node has no route toward {target}: pass NODE_ADDRS= (--node-addrs)")
    return found


def remote_route_source(node: Node, target: str, ssh_config: str) -> str:
    """`node`'s source address toward `target`, asked over ssh."""
    argv = node.ssh_argv(ssh_config) + [f"sh -c {shlex.quote(ROUTE_SOURCE_SH)} sh {shlex.quote(target)}"]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=ASK_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise NodesError(
            f"node {node.name}: no answer within {ASK_TIMEOUT_S:.0f} s when asked for its address "
            f"toward {target}: pass NODE_ADDRS= (--node-addrs)"
        ) from None
    found = route_source(done.stdout)
    if not found:
        said = (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1]
        raise NodesError(
            f"node {node.name}: could not tell its address toward {target} ({said}): "
            "pass NODE_ADDRS= (--node-addrs)"
        )
    return found


def find_node_addrs(nodes: Sequence[Node], ssh_config: str = "") -> tuple[str, ...]:
    """Each node's address toward the others, asked of the nodes (this process runs on node 0): node 0's route
    toward node 1, then each other node's route toward node 0's address."""
    first = local_route_source(resolve(ssh_hostname(nodes[1], ssh_config)))
    if is_loopback(first):
        raise NodesError(
            f"node {nodes[0].name} reaches node {nodes[1].name} over loopback ({first}): list the "
            "nodes by addresses they reach each other at, or pass NODE_ADDRS="
        )
    return (first, *(remote_route_source(node, first, ssh_config) for node in nodes[1:]))


def node_addrs_for(nodes: Sequence[Node], given: Sequence[str], ssh_config: str = "") -> tuple[str, ...]:
    """The given addresses (checked), else the ones the nodes report."""
    return parse_node_addrs(list(given), nodes) if given else find_node_addrs(nodes, ssh_config)


def rendezvous_port(master_port: int | None) -> int:
    """The multi-node rendezvous port: --master-port's, else DEFAULT_RDZV_PORT (fixed, so a firewall can be
    opened for it). Checked free as the store binds it (SO_REUSEADDR: the last launch's closed connections
    still waiting out TIME_WAIT on it do not count)."""
    port = master_port or DEFAULT_RDZV_PORT
    bind_rendezvous_port(port).close()
    return port


def bind_rendezvous_port(port: int, node: str = "this node") -> socket.socket:
    """A socket bound to `port` on every address as c10d's store binds it (SO_REUSEADDR), or NodesError naming
    the node and the fix; the caller closes it (or listens on it: suite/cluster/node_ports.py)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind(("0.0.0.0", port))
    except OSError as e:
        s.close()
        raise NodesError(
            f"the rendezvous port {port} is taken on {node} ({e}): stop what holds it, or pass "
            "--master-port (MASTER_PORT=) with another port open between the nodes"
        ) from None
    return s


def rendezvous_plan(nodes: Sequence[Node], node_addrs: Sequence[str], port: int) -> tuple[str, list[dict]]:
    """The endpoint every node dials (node 0's node address, else its name) and each node's own torchrun
    words: node 0 hosts the store, every node announces its node address when one is known."""
    addrs = list(node_addrs) if len(node_addrs) == len(nodes) else [""] * len(nodes)
    endpoint = f"{addrs[0] or nodes[0].host}:{port}"
    return endpoint, [{"is_host": i == 0, "local_addr": addr} for i, addr in enumerate(addrs)]


def hostfile_node_addrs(text: str) -> tuple[str, ...]:
    """A hostfile's `addr=` column: every node's, or () when no line has one (a partial column is refused)."""
    found = []
    for line in text.splitlines():
        words = line.split("#", 1)[0].split()
        if words:
            found.append(next((w[len("addr=") :] for w in words[1:] if w.startswith("addr=")), ""))
    if not any(found):
        return ()
    if not all(found):
        raise NodesError(
            f"the hostfile gives addr= on {sum(map(bool, found))} of its {len(found)} nodes: give "
            "every node's, or none (then the nodes are asked)"
        )
    return tuple(found)
