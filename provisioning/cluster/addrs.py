"""make remote's NODE_ADDRS= and MASTER_PORT= (HOSTS= only), checked on the laptop before anything is reached.

The nodes' addresses toward each other come from NODE_ADDRS=, else HOSTFILE's `addr=` column, else the suite
asks the nodes (suite/cluster/node_addrs.py); the port is the one rendezvous port the nodes must reach on the
first.
"""

from __future__ import annotations

from pathlib import Path

from suite.cluster.multinode import HOST_RE, NodesError
from suite.cluster.node_addrs import hostfile_node_addrs


def node_addrs_arg(node_addrs: str, hostfile: str) -> str:
    """NODE_ADDRS= as given (each entry a host or address), else the hostfile's addr= column, else ''."""
    if node_addrs:
        bad = [a for a in node_addrs.split(",") if not HOST_RE.match(a.strip())]
        if bad:
            raise ValueError(
                f"NODE_ADDRS entry {bad[0]!r} is not an address: write NODE_ADDRS=10.0.0.1,10.0.0.2"
            )
        return ",".join(a.strip() for a in node_addrs.split(","))
    if hostfile and Path(hostfile).is_file():
        try:
            return ",".join(hostfile_node_addrs(Path(hostfile).read_text()))
        except NodesError as e:
            raise ValueError(f"HOSTFILE={hostfile}: {e}") from None
    return ""


def master_port_arg(text: str) -> int:
    if not text:
        return 0
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise ValueError(f"MASTER_PORT={text!r} is not a port 1–65535 (the default is 29400)")
    return int(text)
