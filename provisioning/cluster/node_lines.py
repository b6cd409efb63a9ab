"""The shell text of a job across several nodes, run by the first node: the suite's node arguments, each
other node's set-up over ssh, and the other nodes' run locks kept fresh and given back. On a group of one each
is empty (provisioning/drive.py calls them all the same)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from provisioning.cluster.nodes import on_node, reach_argv
from provisioning.job import jobs
from provisioning.runtime import cuda_check
from provisioning.session.shell import given_flags, join, quote
from suite.cluster.multinode import Node

if TYPE_CHECKING:
    from provisioning.group import NodeRunSettings


def suite_node_args(labels: list[str], settings: NodeRunSettings) -> list[str]:
    """`python -m suite run`'s multi-node arguments (--nproc comes with suite_args, from the GPUs counted)."""
    return ["--nodes", ",".join(labels)] + given_flags(
        [
            ("--ssh-config", settings.ssh_config),
            ("--socket-ifname", settings.socket_ifname),
            ("--node-addrs", settings.node_addrs),
            ("--master-port", settings.master_port),
        ]
    )


def other_nodes_setup(job_dir: str, nodes: list[Node], ssh_config: str) -> str:
    """The POSIX lines the first node's set-up ends with: each other node's set-up (`setup-<node>.sh`, put
    there by the laptop) over ssh, all at once, each one's output kept and shown prefixed with its name; a
    node that fails ends the set-up with exit 2 and its GPU check's refusal (if any) in jobs/<id>/refused."""
    if not nodes:
        return ""
    q = quote
    lines = []
    for i, node in enumerate(nodes):
        script, log = f"{job_dir}/setup-{node.name}.sh", f"{job_dir}/setup-{node.name}.log"
        lines.append(f'echo "── set-up on node {node.name} (over ssh from $(hostname))"')
        lines.append(
            f"{join(reach_argv(node, ssh_config))} {q(join(['sh', script]))} > {q(log)} 2>&1 < /dev/null &"
        )
        lines.append(f"pid{i}=$!")
    lines.append("failed=''")
    for i, node in enumerate(nodes):
        log = f"{job_dir}/setup-{node.name}.log"
        lines.append(f'if wait $pid{i}; then :; else failed="$failed {node.name}"; fi')
        lines.append(f"sed {q('s/^/[' + node.name + '] /')} {q(log)}")
    lines.append('if [ -n "$failed" ]; then')
    for node in nodes:
        log = f"{job_dir}/setup-{node.name}.log"
        refused = f"{job_dir}/{cuda_check.REFUSED_FILE}"
        lines.append(f"  line=$(sed -n {q('s/^' + cuda_check.REFUSED + '//p')} {q(log)} | tail -n 1)")
        lines.append(f'  [ -z "$line" ] || echo "node {node.name}: $line" > {q(refused)}')
    lines.append('  echo "set-up FAILED on node(s)$failed: see the [node] lines above"')
    lines.append("  exit 2")
    lines.append("fi")
    return "\n".join(lines) + "\n"


def release_node_locks_lines(nodes: list[Node], base: str, job_id: str, ssh_config: str) -> str:
    """The job's last lines before giving its own lock back: each other node's lock given back over ssh from
    the first node (only while it is still this job's: on shared storage the first node's, given back
    once)."""
    return "".join(
        f"{on_node(node, jobs.release_lock_argv(f'{base}/jobs', job_id), ssh_config)} "
        "> /dev/null 2>&1 < /dev/null || true\n"
        for node in nodes
    )


def touch_node_locks_command(nodes: list[Node], base: str, job_id: str, ssh_config: str) -> str:
    """The job's heartbeat, a line per node: each other node's lock freshened over ssh from the first node
    (only while it is still this job's), so that a start there never takes it for an abandoned one while this
    job runs."""
    return "\n".join(
        f"{on_node(node, jobs.touch_lock_argv(f'{base}/jobs', job_id), ssh_config)} "
        "> /dev/null 2>&1 < /dev/null"
        for node in nodes
    )
