"""The nodes of a multi-node run and the command lines that start a launch on each: pure text, no I/O.

    python -m suite run --nodes root@node-a,root@node-b --ssh-config ~/.ssh/cluster --socket-ifname ens5

The first node is the one the suite runs on; it hosts torchrun's c10d rendezvous store and is the
rendezvous endpoint every node dials (`--rdzv-endpoint=<first node>:<port>`). Each node runs its own
torchrun (`--nnodes=N`), started on the first node directly and on the others over SSH
(as mpirun's rsh agent reaches them: the first node must reach the others without a password). Inside
a Slurm allocation (`SLURM_JOB_NODELIST` set) the nodes are the allocation's: `nodes_from_slurm`.
"""

from __future__ import annotations

import re
import shlex
import subprocess
from dataclasses import dataclass
from typing import Mapping, Sequence

from suite.cluster import hostlist

# What a node's torchrun gets from the first node's environment besides the suite's own variables:
# the communication libraries' settings (NCCL_IB_HCA, NCCL_DEBUG, GLOO_SOCKET_IFNAME, …).
FORWARDED_PREFIXES = ("NCCL_", "GLOO_", "TORCH_", "CUDA_", "OMP_", "MKL_", "CARDTIME_", "UCX_", "FI_")
FORWARDED_NAMES = ("PYTHONPATH", "PYTHONUNBUFFERED", "LD_LIBRARY_PATH", "PATH")
HOST_RE = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$")
USER_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9._-]*$")
JOIN_TIMEOUT_S = 120.0  # how long a node waits at the rendezvous for the others (torchrun's default is 600 s)


def arrow(sender: str, receiver: str) -> str:
    """A node pair's name in rows and verdicts: 'gpu-a→gpu-b'."""
    return f"{sender}→{receiver}"


class NodesError(ValueError):
    """A nodes list that cannot be used; the message names the entry and the fix."""


@dataclass(frozen=True)
class Node:
    user: str
    host: str
    port: int | None

    @property
    def name(self) -> str:
        """The node's name in the run directory (raw/<stage>/<name>/) and in rows: its host."""
        return self.host

    @property
    def destination(self) -> str:
        return f"{self.user}@{self.host}" if self.user else self.host

    def ssh_argv(self, ssh_config: str = "", tty: bool = False) -> list[str]:
        """ssh to this node; tty: a remote terminal, so that the remote command is hung up when ssh is
        killed."""
        argv = ["ssh", "-o", "BatchMode=yes"]
        if ssh_config:
            argv += ["-F", ssh_config]
        if self.port:
            argv += ["-p", str(self.port)]
        if tty:
            argv.append("-tt")
        return argv + [self.destination]


def parse_node(entry: str) -> Node:
    """'root@gpu-a:2222' → Node('root', 'gpu-a', 2222); a bad entry raises NodesError naming it."""
    text = entry.strip()
    user, _, rest = text.rpartition("@")
    host, sep, port_text = rest.partition(":")
    if user and not USER_RE.match(user):
        raise NodesError(f"node {entry!r}: user {user!r} is not a user name: write user@host[:port]")
    if not HOST_RE.match(host):
        raise NodesError(f"node {entry!r}: {host!r} is not a host name or address: write user@host[:port]")
    port = None
    if sep:
        if not port_text.isdigit() or not 0 < int(port_text) < 65536:
            raise NodesError(
                f"node {entry!r}: port {port_text!r} is not a number 1–65535: write user@host[:port]"
            )
        port = int(port_text)
    return Node(user=user, host=host, port=port)


def parse_nodes(entries: Sequence[str] | str) -> tuple[Node, ...]:
    """A comma-separated list (or a sequence) of nodes; empty entries and a node named twice are refused."""
    if isinstance(entries, str):
        entries = entries.split(",")
    nodes = []
    for i, entry in enumerate(entries):
        if not entry.strip():
            raise NodesError(
                f"node {i + 1} of the list is empty (a stray comma?): write a,b with no empty entry"
            )
        nodes.append(parse_node(entry))
    seen: dict[str, int] = {}
    for i, node in enumerate(nodes):
        if node.name in seen:
            raise NodesError(
                f"node {node.name} is listed twice (entries {seen[node.name] + 1} and {i + 1}): "
                "name each node once"
            )
        seen[node.name] = i
    return tuple(nodes)


def hostfile_nodes(data: bytes, source: str) -> tuple[str, ...]:
    """read_hostfile of a hostfile's bytes; a file that is not UTF-8 text (a binary, a latin-1 list) is one
    NodesError naming `source`, not a decoding traceback."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise NodesError(
            f"{source}: byte {data[e.start]:#04x} at offset {e.start} is not UTF-8 text: a hostfile lists "
            "one user@host[:port] a line"
        ) from None
    return read_hostfile(text, source)


def read_hostfile(text: str, source: str = "hostfile") -> tuple[str, ...]:
    """Node entries from a hostfile: one a line, '#' comments and blank lines skipped, mpirun's `slots=N`
    allowed and dropped (so is `addr=`, the node's address toward the others: suite/cluster/node_addrs.py);
    each entry checked like --nodes (a typo is refused with its line number)."""
    out = []
    for number, line in enumerate(text.splitlines(), 1):
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        extra = [w for w in words[1:] if not re.fullmatch(r"(slots|max_slots|max-slots)=\d+|addr=\S+", w)]
        if extra:
            raise NodesError(
                f"{source} line {number}: {' '.join(extra)!r} after {words[0]!r}: one node a line "
                "(user@host[:port], optionally slots=N)"
            )
        try:
            parse_node(words[0])
        except NodesError as e:
            raise NodesError(f"{source} line {number}: {e}") from None
        out.append(words[0])
    if not out:
        raise NodesError(f"{source} names no node: write one user@host[:port] a line")
    parse_nodes(out)  # a node named twice
    return tuple(out)


def nodes_from_slurm(env: Mapping[str, str]) -> tuple[str, ...]:
    """The allocation's nodes (first = the batch host's list head), or () outside an allocation or on one
    node. The list is counted first (refused, naming the variable, when malformed or enormous); then `scontrol
    show hostnames` is asked (it knows every form) and suite/cluster/hostlist.py's expansion is the
    fallback."""
    var = "SLURM_JOB_NODELIST" if env.get("SLURM_JOB_NODELIST") else "SLURM_NODELIST"
    nodelist = env.get(var) or ""
    if not nodelist:
        return ()
    try:
        hostlist.count(nodelist)
    except hostlist.HostListError as e:
        raise NodesError(f"{var}: {e}") from None
    try:
        shown = subprocess.run(
            ["scontrol", "show", "hostnames", nodelist], capture_output=True, text=True, timeout=30
        )
        names = shown.stdout.split() if shown.returncode == 0 else []
    except (OSError, subprocess.TimeoutExpired):
        names = []
    names = names or hostlist.expand(nodelist)
    return tuple(names) if len(names) > 1 else ()


def torchrun_node_command(
    python: str,
    module: str,
    args: Sequence[str],
    *,
    nproc: int,
    nnodes: int,
    endpoint: str,
    rdzv_id: str,
    max_restarts: int = 0,
    join_timeout_s: float = JOIN_TIMEOUT_S,
    extra_torchrun_args: Sequence[str] = (),
    min_nodes: int | None = None,
    last_call_s: float | None = None,
    is_host: bool | str | None = None,
    local_addr: str = "",
) -> list[str]:
    """One node's torchrun: c10d rendezvous at `endpoint` (host:port of the first node). min_nodes: elastic
    (`--nnodes=MIN:MAX`: a restart goes on without lost nodes, once last_call_s has passed with MIN present).
    is_host: whether this node hosts the store (c10d's `is_host`; None: torch guesses by matching the endpoint
    against the host's names, which a NAT'd or second address defeats; a str: a mark srun's per-node shell
    replaces, suite/cluster/slurm.py); local_addr: the address this node announces to the others (torchrun's
    --local-addr; else its FQDN, which may resolve to 127.0.1.1)."""
    conf = f"join_timeout={int(join_timeout_s)}" + (
        f",last_call_timeout={int(last_call_s)}" if last_call_s else ""
    )
    conf += "" if is_host is None else f",is_host={is_host if isinstance(is_host, str) else int(is_host)}"
    return [
        python,
        "-m",
        "torch.distributed.run",
        # no --node-rank: c10d numbers the nodes as they join (torchrun ignores it, saying so)
        f"--nnodes={min_nodes}:{nnodes}" if min_nodes and min_nodes < nnodes else f"--nnodes={nnodes}",
        f"--nproc-per-node={nproc}",
        "--rdzv-backend=c10d",
        f"--rdzv-endpoint={endpoint}",
        f"--rdzv-id={rdzv_id}",
        f"--rdzv-conf={conf}",
        f"--max-restarts={max_restarts}",
        *([f"--local-addr={local_addr}"] if local_addr else []),
        *extra_torchrun_args,
        "-m",
        module,
        *args,
    ]


def forwarded_env(env: Mapping[str, str]) -> dict[str, str]:
    """The part of the first node's worker environment another node's torchrun is given."""
    return {k: v for k, v in env.items() if k.startswith(FORWARDED_PREFIXES) or k in FORWARDED_NAMES}


def remote_shell_command(cwd: str, env: Mapping[str, str], argv: Sequence[str]) -> str:
    """What ssh runs on a node: into the same checkout, the environment set, the command exec'd (so the
    node's torchrun is the session's process and a hang-up reaches it)."""
    assignments = " ".join(shlex.quote(f"{k}={v}") for k, v in sorted(env.items()))
    return f"cd {shlex.quote(cwd)} && exec env {assignments} {shlex.join(argv)}"


def node_socket_env(ifname: str) -> dict[str, str]:
    """gloo's and NCCL's socket interface on every node; without one, the libraries pick (never `lo` across
    nodes)."""
    return {"GLOO_SOCKET_IFNAME": ifname, "NCCL_SOCKET_IFNAME": ifname} if ifname else {}
