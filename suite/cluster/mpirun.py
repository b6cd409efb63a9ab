"""Open MPI's `mpirun` across the nodes of a multi-node profile (nccl-tests' MPI form): pure text.

    mpirun -np 16 --hostfile raw/bandwidth/hostfile --map-by ppr:8:node --bind-to none \
      --mca plm_rsh_agent 'ssh -o BatchMode=yes -F cfg' --mca btl self,tcp --mca btl_tcp_if_include ens5 \
      --mca oob_tcp_if_include ens5 -x NCCL_SOCKET_IFNAME=ens5 -x NCCL_ALGO=Ring …  all_reduce_perf -g 1 …

One process per GPU, `per_node` on each node in hostfile order (`ppr:N:node`), CPU placement left to the OS
(`--bind-to none`, as torchrun does), every NCCL/CUDA variable exported with its value (`-x NAME=VALUE`), the
other nodes reached with the same ssh (user, port, ssh_config) the torchrun launches use. The hostfile names
each node by its node-to-node address where one is known (NODE_ADDRS=, a hostfile's addr= column, or asked of
the nodes: the addresses the rendezvous uses, suite/cluster/node_addrs.py), not by the name the laptop reached
it at (a NAT'd public address, a name resolving to 127.0.1.1). Open MPI's own traffic (out-of-band and the tcp
transport) is held to the named interface where one is given, else to the node addresses themselves (each as a
/32 network: on every node the interface that carries its node address): on a cluster with a management
network or a second NIC beside the nodes' own, mpirun otherwise tries whichever it finds first.
"""

from __future__ import annotations

import ipaddress
import os
import shlex
import sys
from typing import Mapping, Sequence

from suite.cluster.multinode import Node, NodesError

EXPORTED_PREFIXES = ("NCCL_", "CUDA_", "UCX_", "FI_", "LD_LIBRARY_PATH", "PATH")


def hostfile_text(nodes: Sequence[Node], per_node: int, addrs: Sequence[str] = ()) -> str:
    """Open MPI's hostfile: one node a line, by its node address where known, with its slots (the GPUs it runs
    processes for)."""
    names = list(addrs) if len(addrs) == len(nodes) else [n.host for n in nodes]
    return "".join(f"{name} slots={per_node}\n" for name in names)


def tcp_include(ifname: str, addrs: Sequence[str]) -> str:
    """btl_tcp_if_include / oob_tcp_if_include's value: the interface, else every node address as a /32
    network (Open MPI matches an interface whose address lies in a listed network), else '' (only IP addresses
    can be)."""
    if ifname:
        return ifname
    try:
        return ",".join(f"{ipaddress.IPv4Address(a)}/32" for a in addrs) if addrs else ""
    except ValueError:  # a host name among them: no network to name
        return ""


def install_prefix(mpirun: str) -> str | None:
    """Open MPI's install root (`/opt/amazon/openmpi` for `/opt/amazon/openmpi/bin/mpirun`) where it is not
    the system's (/usr, /usr/local): mpirun's --prefix, so that each other node's orted is found though ssh
    starts it with the login's bare PATH ("orted: command not found" otherwise). None for a system install or
    a bare name."""
    if not os.path.isabs(mpirun):
        return None
    bin_dir = os.path.dirname(os.path.realpath(mpirun))
    root = os.path.dirname(bin_dir)
    return root if os.path.basename(bin_dir) == "bin" and root not in ("/usr", "/usr/local", "/") else None


def rsh_agent(nodes: Sequence[Node], ssh_config: str = "", in_image: bool = False) -> str:
    """The ssh command mpirun starts its daemons with; one user and port for all nodes (mpirun cannot vary
    it). in_image: a containerised run, whose other nodes run the daemon in the same image
    (suite/cluster/node_rsh.py)."""
    users = {n.user for n in nodes[1:]}
    ports = {n.port for n in nodes[1:]}
    if len(users) > 1 or len(ports) > 1:
        raise NodesError(
            "mpirun reaches every node with one ssh command: give the nodes one user and one port, "
            "or put each node's User and Port in an ssh_config (--ssh-config) and list bare host names"
        )
    words = ["ssh", "-o", "BatchMode=yes"] + (["-F", ssh_config] if ssh_config else [])
    (user,), (port,) = users or {""}, ports or {None}
    words += (["-l", user] if user else []) + (["-p", str(port)] if port else [])
    if in_image:
        words = [sys.executable, "-m", "suite.cluster.node_rsh", *words, "--"]
    return shlex.join(words)


def exported_names(env: Mapping[str, str]) -> list[str]:
    return sorted(k for k in env if k.startswith(EXPORTED_PREFIXES))


def mpirun_across_nodes(
    mpirun: str,
    nodes: Sequence[Node],
    per_node: int,
    hostfile: str,
    *,
    env: Mapping[str, str] = {},
    ssh_config: str = "",
    ifname: str = "",
    as_root: bool = False,
    in_image: bool = False,
    addrs: Sequence[str] = (),
) -> list[str]:
    """The words before the program: `per_node` processes on each node of `hostfile` (hostfile_text's); addrs:
    the node addresses, whose networks Open MPI is held to when no interface is named."""
    words = [
        mpirun,
        "-np",
        str(per_node * len(nodes)),
        "--hostfile",
        hostfile,
        "--map-by",
        f"ppr:{per_node}:node",
        "--bind-to",
        "none",
        "--mca",
        "plm_rsh_agent",
        rsh_agent(nodes, ssh_config, in_image),
    ]
    prefix = install_prefix(mpirun)
    if prefix:  # the other nodes' orted and libraries, which a non-interactive ssh's PATH does not reach
        words += ["--prefix", prefix]
    if as_root:
        words.append("--allow-run-as-root")  # root on a rented box or in a container is the usual case
    include = tcp_include(ifname, addrs)
    if include:
        words += [
            "--mca",
            "btl",
            "self,tcp",
            "--mca",
            "btl_tcp_if_include",
            include,
            "--mca",
            "oob_tcp_if_include",
            include,
        ]
    for name in exported_names(env):
        words += ["-x", f"{name}={env[name]}"]  # the value spelled out: mpirun's own environment may lack it
    return words
