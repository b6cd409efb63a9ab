"""The hosts of one `make remote`, as a group: HOST= is a group of one, HOSTS=/HOSTFILE= of several.

fabric's `Group` mirrors its `Connection`, and a `GroupResult` says what succeeded where; here a `Group` holds
each host's probe (its facts and preflight's decision) and the first host's open connection, and every step of
the one driver (provisioning/drive.py) takes it whatever its size: a step that concerns "the other nodes"
(reaching them, their locks, their set-up) has nothing to do on a group of one.

    python -m provisioning remote --host root@203.0.113.7:2222 …           # a group of one
    python -m provisioning remote --hosts root@gpu-a,root@gpu-b …          # a group of two
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from provisioning.cluster.nodes import SSH_CONNECT_TIMEOUT_S, cluster_problems, reach_argv
from provisioning.job import hostlock
from provisioning.session import preflight
from provisioning.session.connection import Remote, RemoteError
from provisioning.session.hosts import HostSpec, unnamed_user_note
from provisioning.session.login import connect_for_transfers, run_preflight
from provisioning.session.options import RemoteOptions, world_problem
from provisioning.session.steps import Steps
from suite.cluster.multinode import Node, parse_node


@dataclass(frozen=True)
class NodeRunSettings:
    """How the first node reaches and runs the others (HOSTS= only)."""

    ssh_config: str = ""
    """NODE_SSH_CONFIG=: the ssh_config *on the first node* it reaches the others with ('' = its
    ~/.ssh/config)."""
    socket_ifname: str = ""
    """SOCKET_IFNAME=: the interface gloo and NCCL use between nodes ('' = the libraries choose)."""
    nproc: int = 0
    """NPROC=: processes per node (0 = the profile's: on a GPU node, its GPU count)."""
    node_addrs: str = ""
    """NODE_ADDRS= (or HOSTFILE's addr= column): each node's address toward the others ('' = asked of the
    nodes)."""
    master_port: int = 0
    """MASTER_PORT=: the rendezvous port on the first node (0 =
    suite.cluster.node_addrs.DEFAULT_RDZV_PORT)."""


@dataclass
class Member:
    """One host of the group, as preflight found it."""

    spec: HostSpec
    facts: preflight.HostFacts
    decision: preflight.Decision

    @property
    def node(self) -> Node:
        return parse_node(self.spec.label)


@dataclass
class GroupResult:
    """What a step gave on each host: its value where it succeeded, why where it did not (in the group's
    order)."""

    succeeded: dict[str, Any] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.failed


@dataclass
class Group:
    members: list[Member]
    remote: Remote
    """The first host's connection, open: the job runs there."""

    @property
    def first(self) -> Member:
        return self.members[0]

    @property
    def others(self) -> list[Member]:
        return self.members[1:]

    @property
    def single(self) -> bool:
        return len(self.members) == 1

    @property
    def labels(self) -> list[str]:
        return [m.spec.label for m in self.members]

    @property
    def base(self) -> str:
        return self.first.facts.base

    @property
    def on_nodes(self) -> str:
        """' on 3 nodes' for a step's line, '' on a group of one."""
        return "" if self.single else f" on {len(self.members)} nodes"

    def runtime(self, opts: RemoteOptions) -> str:
        """One host: what preflight chose for it (Docker where it has GPU support). Several: nodes_runtime's,
        settled before their preflight."""
        return self.first.decision.runtime if self.single else opts.runtime

    def said(self, member: Member, text: str) -> str:
        """`text` about one host, naming it where the group has several."""
        return text if self.single else f"node {member.spec.label}: {text}"

    def reach(self, ssh_config: str) -> GroupResult:
        """From the first node, `ssh <node> true` for every other node (none on a group of one)."""
        result = GroupResult()
        for m in self.others:
            r = self.remote.run(
                reach_argv(m.node, ssh_config) + ["true"], check=False, timeout=SSH_CONNECT_TIMEOUT_S + 20
            )
            if r.exit_code == 0:
                result.succeeded[m.spec.label] = True
            else:
                said = ((r.stderr or r.stdout).strip().splitlines() or [f"exit code {r.exit_code}"])[-1]
                result.failed[m.spec.label] = reach_problem(self.first.spec.label, m.node, said, ssh_config)
        return result

    def lock_others(self, opts: RemoteOptions, job_id: str, holder: dict[str, Any]) -> list:
        """Every other node's run lock for this job too, so that a run already on any node (one host's, or
        another multi-node run's) refuses this one naming that node; on a busy node the locks taken are given
        back."""
        taken: list[tuple[Member, hostlock.Lock]] = []
        try:
            for m in self.others:
                node_remote = connect_for_transfers(dataclasses.replace(opts, host=m.spec))
                try:
                    taken.append(
                        (m, hostlock.acquire(node_remote, m.facts.base, job_id, holder, role="node"))
                    )
                finally:
                    node_remote.close()
        except BaseException:
            release_locks(opts, taken)
            raise
        return taken


def release_locks(opts: RemoteOptions, taken: list) -> None:
    """A start that failed gives the other nodes' locks back (each only while still this job's)."""
    for m, lock in taken:
        try:
            node_remote = connect_for_transfers(dataclasses.replace(opts, host=m.spec))
        except RemoteError:
            continue  # the lock goes stale by itself (hostlock.LOCK_STALE_S)
        try:
            hostlock.release(node_remote, lock)
        finally:
            node_remote.close()


def reach_problem(first: str, node: Node, said: str, ssh_config: str) -> str:
    """One line: which node cannot reach which, what ssh said, and the fix."""
    if "host key verification failed" in said.lower():
        fix = f"accept its host key once on {first}: ssh {node.destination} true"
    else:
        fix = (
            f"on {first} make a key (ssh-keygen -t ed25519) and add its .pub to {node.destination}'s "
            "~/.ssh/authorized_keys (ssh-copy-id)" + ("" if ssh_config else ", or pass NODE_SSH_CONFIG=")
        )
    return f"node {first} cannot reach node {node.name} over ssh without a password ({said}): {fix}"


def node_world(opts: RemoteOptions, settings: NodeRunSettings) -> RemoteOptions:
    """The options with NPROC= of HOSTS= (the nodes' settings) as the run's processes per node."""
    return dataclasses.replace(opts, nproc=settings.nproc or opts.nproc)


def nodes_runtime(opts: RemoteOptions) -> str:
    """Several nodes: RUNTIME=docker (or IMAGE=) runs one image on every node; else (unset too) each node's
    Python in a venv."""
    return "docker" if opts.runtime == "docker" or opts.image else (opts.runtime or "host")


def runtime_problem(opts: RemoteOptions) -> str | None:
    """IMAGE= with RUNTIME=host contradict each other; any other runtime preflight judges."""
    if opts.image and opts.runtime == "host":
        return f"IMAGE={opts.image} runs in Docker but RUNTIME=host was asked: drop one of them"
    return None


def base_problems(members: list[Member]) -> list[str]:
    """The per-node torchrun runs the first node's checkout and venv paths on every node: the remote folder
    must agree."""
    first = members[0]
    return [
        f"node {m.spec.label}: remote folder {m.facts.base} where {first.spec.label} has {first.facts.base}: "
        f"pass REMOTE_DIR=<one absolute path> that every node can create"
        for m in members[1:]
        if m.facts.base != first.facts.base
    ]


def login_problems(members: list[Member], runtime: str) -> list[str]:
    """RUNTIME=docker across nodes runs every node's container as the first node's login (its uid:gid, its
    account mapped in: cluster/image.py), so each node's login must be that uid:gid, root or not: else the run
    folders on a node would belong to a user it does not have. Rented nodes of one image give every node the
    same login."""
    if runtime != "docker":
        return []
    first = members[0]
    want = (first.facts.uid, first.facts.gid)
    return [
        f"node {m.spec.label}: RUNTIME=docker across nodes runs every node's container as "
        f"{first.spec.label}'s uid:gid {want[0]}:{want[1]}, but this login is {m.facts.uid}:{m.facts.gid}: "
        "log in with the same user on every node (HOSTS=user@…), or use RUNTIME=host"
        for m in members[1:]
        if None not in want and (m.facts.uid, m.facts.gid) != want
    ]


def probe(opts: RemoteOptions, steps: Steps) -> Group | None:
    """Every host probed and judged on its own, then against the first; None (its REFUSED line said) at the
    first that cannot take part. The first host's connection stays open for the run."""
    specs = opts.hosts or (opts.host,)
    single = len(specs) == 1
    members: list[Member] = []
    first_remote: Remote | None = None
    try:
        for spec in specs:
            member, remote = probe_one(dataclasses.replace(opts, host=spec), steps, single)
            if member is None:
                return None
            if first_remote is None:
                first_remote = remote
            else:
                remote.close()
            members.append(member)
        problems = (
            cluster_problems([(m.spec.label, m.facts) for m in members], opts.runtime)
            + base_problems(members)
            + login_problems(members, opts.runtime)
        )
        if problems:
            steps.say(f"REFUSED: {problems[0]}")
            return None
        group, first_remote = Group(members, first_remote), None
        return group
    finally:
        if first_remote is not None:  # refused: nothing keeps it
            first_remote.close()


def probe_one(opts: RemoteOptions, steps: Steps, single: bool) -> tuple[Member | None, Remote | None]:
    """One host's preflight (its connection, its probe, its decision); a group of one refuses with every
    problem, a node of several with its first, named."""
    spec = opts.host
    steps.begin("preflight", f"checking {spec.label}" if single else f"checking node {spec.label}")
    if note := unnamed_user_note(spec, opts.ssh_config):
        steps.say(f"note: {note}")
    try:
        remote = connect_for_transfers(opts)
    except RemoteError as e:
        if single:  # one host's connect failure is the command's error, with its hint
            raise
        fix = (
            e.hint
            or "check the address and port, the key (KEY=) or SSH_CONFIG=, or leave the node out of HOSTS="
        )
        steps.say(f"REFUSED: node {spec.label}: {e.what}: {fix}")
        return None, None
    try:
        facts, decision = run_preflight(remote, opts, steps)
        problems = [
            *decision.problems,
            *filter(None, [world_problem(opts, len(facts.gpus))] if single else []),
        ]
    except BaseException:
        remote.close()
        raise
    if problems:
        remote.close()
        for p in problems if single else problems[:1]:
            steps.say(f"REFUSED: {p}" if single else f"REFUSED: node {spec.label}: {p}")
        return None, None
    return Member(spec, facts, decision), remote
