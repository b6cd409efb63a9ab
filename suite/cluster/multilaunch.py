"""One launch across the nodes of a multi-node profile: a torchrun on every node, joined by c10d rendezvous.

StageContext.torchrun launches here instead of suite.launch.torchrun.run_torchrun when the profile names more
than one node. The first node's torchrun runs as a child of the suite; each other node's over `ssh -tt` (a
hang-up ends it when the suite kills the ssh). Each node keeps its own output under raw/<stage>/<node>/ —
torchrun's log and its ranks' logs — and the ranks' rows go to the launch's output folder; after the launch,
what a node wrote on its own disk (a cluster without shared storage) is copied back over the same ssh, files
the first node already has (shared storage) left alone. A node that fails ends the launch on every node.
"""

from __future__ import annotations

import functools
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Sequence

from suite.cluster.multinode import (
    JOIN_TIMEOUT_S,
    Node,
    NodesError,
    forwarded_env,
    node_socket_env,
    parse_nodes,
    remote_shell_command,
    torchrun_node_command,
)
from suite.cluster.node_addrs import rendezvous_plan, rendezvous_port
from suite.cluster.node_container import container_name, container_node_command, container_prefix
from suite.cluster.slurm import IS_HOST_MARK, NODE_ADDR_MARK, SRUN_ARGS_ENV, srun_launch_command
from suite.cluster.slurm_network import node_plan
from suite.cluster.slurm_pyxis import in_container, node_python
from suite.config import Profile
from suite.forensics.collect import RESULT, collect_quietly, explained
from suite.launch import procs
from suite.launch.torchrun import (
    WORKER_PROGRESS,
    LaunchError,
    LaunchResult,
    kill_group,
    launch_out_dir,
    log_tail,
    worker_env,
)

PEER_GRACE_S = (
    20.0  # after one node fails, how long the others get to fail by themselves before they are killed
)
COPY_BACK_TIMEOUT_S = 120.0


def run_across_nodes(
    profile: Profile,
    module: str,
    args: Sequence[str] = (),
    *,
    raw_dir: Path,
    tag: str = "",
    nproc: int | None = None,
    timeout_s: float | None = None,
    max_restarts: int = 0,
    env: dict[str, str] | None = None,
    extra_torchrun_args: Sequence[str] = (),
    on_poll: Callable[[], None] | None = None,
    min_nodes: int | None = None,
    expendable: Sequence[str] = (),
    last_call_s: float | None = None,
) -> LaunchResult:
    """min_nodes: an elastic launch (`--nnodes=MIN:N`): after a failure the survivors restart without the lost
    nodes once `last_call_s` has passed. expendable: nodes whose failure is the point (the node-loss drill):
    the launch waits for the others and succeeds when they do."""
    nodes = parse_nodes(profile.nodes)
    raw_dir = Path(raw_dir).resolve()
    prefix = f"{tag}." if tag else ""
    out_dir = launch_out_dir(raw_dir, tag)
    out_dir.mkdir(parents=True, exist_ok=True)
    for stale in [
        *out_dir.glob("rows.rank*.jsonl"),
        out_dir / WORKER_PROGRESS,
        raw_dir / f"{prefix}{RESULT}",
    ]:
        stale.unlink(missing_ok=True)
    n = nproc or profile.nproc
    try:
        port = rendezvous_port(profile.master_port)
    except NodesError as e:
        raise LaunchError(str(e)) from None
    endpoint, per_node = rendezvous_plan(nodes, profile.node_addrs, port)
    # one port, a fresh id per launch
    rdzv_id = f"cardtime-{raw_dir.name}-{tag or 'launch'}-{time.time_ns() % 10**12}"
    join_s = min(JOIN_TIMEOUT_S, timeout_s) if timeout_s else JOIN_TIMEOUT_S
    base = worker_env(profile, env)
    if "GLOO_SOCKET_IFNAME" not in (os.environ if env is None else env):
        del base["GLOO_SOCKET_IFNAME"]  # the single-node default (loopback) would keep every node to itself
    base.update(node_socket_env(profile.socket_ifname))
    base.update(
        CARDTIME_OUT_DIR=str(out_dir), CARDTIME_LOG_PREFIX=prefix, CARDTIME_NODES=",".join(profile.nodes)
    )
    started: list[tuple[Node, subprocess.Popen, list[str]]] = []
    node_command = functools.partial(
        torchrun_node_command,
        sys.executable,
        module,
        args,
        nproc=n,
        nnodes=len(nodes),
        endpoint=endpoint,
        rdzv_id=rdzv_id,
        max_restarts=max_restarts,
        join_timeout_s=join_s,
        extra_torchrun_args=extra_torchrun_args,
        min_nodes=min_nodes,
        last_call_s=last_call_s,
    )
    srun_args = shlex.split(os.environ.get(SRUN_ARGS_ENV, ""))
    # srun's, the same on every node: each node's shell puts in whether it hosts the store and its own address
    command = node_command(is_host=IS_HOST_MARK, local_addr=NODE_ADDR_MARK)
    if profile.node_launcher == "srun" and in_container(srun_args):  # pyxis: the image's Python on every node
        command = [node_python(srun_args, sys.executable), *command[1:]]
    start = time.monotonic()
    hang = None
    try:
        if profile.node_launcher == "srun":  # one srun across the allocation, a torchrun per node
            for node in nodes:
                # srun opens %N's log before the task runs
                (raw_dir / node.name).mkdir(parents=True, exist_ok=True)
            srun = srun_launch_command(
                len(nodes),
                str(raw_dir),
                f"{prefix}torchrun.log",
                command,
                srun_args,
                elastic=bool(min_nodes and min_nodes < len(nodes)),
                expendable=expendable,
                plan=node_plan(nodes, profile.node_addrs or [n.name for n in nodes]),
            )
            started.append((nodes[0], _start_local(srun, base, raw_dir / f"{prefix}srun.log"), srun))
        for rank, node in enumerate(nodes if profile.node_launcher != "srun" else ()):
            node_dir = raw_dir / node.name
            node_dir.mkdir(parents=True, exist_ok=True)
            node_env = {**base, "CARDTIME_RAW_DIR": str(node_dir), "CARDTIME_NODE_NAME": node.name}
            mine = node_command(**per_node[rank])  # node 0 hosts the store; each announces its node address
            started.append(
                (
                    node,
                    _start(
                        node, rank, mine, node_env, node_dir / f"{prefix}torchrun.log", profile.ssh_config
                    ),
                    mine,
                )
            )
        failed = _wait(
            started,
            start,
            timeout_s,
            on_poll,
            module,
            lambda: _logs(raw_dir, nodes, prefix),
            expendable=set(expendable),
            ask_ranks=functools.partial(
                collect_quietly,
                raw_dir,
                prefix,
                world=n * len(nodes),
                reason="timeout",
                store=(endpoint.rsplit(":", 1)[0], port),
                node_dirs=[raw_dir / node.name for node in nodes],
            ),
        )
    # _wait's, after it asked the ranks: read again below, once every node's records are here
    except TimedOut as timed_out:
        hang = timed_out
        for _, proc, _ in started:
            kill_group(proc)
    except BaseException:
        for _, proc, _ in started:
            kill_group(proc)
        raise
    finally:
        # under Slurm: shared storage
        for node, _, _ in started[1:] if profile.node_launcher == "ssh" else ():
            _copy_back(node, profile.ssh_config, raw_dir, [node.name, out_dir.name])
    every_node = {"node_dirs": [raw_dir / node.name for node in nodes], "world": n * len(nodes)}
    if hang is not None:
        findings = collect_quietly(raw_dir, prefix, reason="timeout", ask_live=False, **every_node)
        raise LaunchError(explained(str(hang), findings), command=hang.command, log_tail=hang.log_tail)
    if failed:
        node, proc, failed_command = failed
        where = "across the allocation (srun)" if profile.node_launcher == "srun" else f"on node {node.name}"
        findings = collect_quietly(
            raw_dir,
            prefix,
            reason="failed",
            torchrun_logs=[raw_dir / node.name / f"{prefix}torchrun.log" for node in nodes],
            ask_live=False,
            **every_node,
        )
        raise LaunchError(
            explained(f"torchrun running {module} {where} exited with code {proc.returncode}", findings),
            command=failed_command,
            exit_code=proc.returncode,
            log_tail=log_tail(_logs(raw_dir, nodes, prefix)),
        )
    return LaunchResult(
        command=started[0][2],
        exit_code=0,
        seconds=time.monotonic() - start,
        out_dir=out_dir,
        log_paths=_logs(raw_dir, nodes, prefix),
    )


def run_on_each_node(
    profile: Profile, argv: Sequence[str], *, raw_dir: Path, log_name: str, timeout_s: float = 120.0
) -> list[str]:
    """A plain command (no torchrun, no rendezvous: a probe) once on every node, at once: here on the first,
    over ssh on the others, or one srun across an allocation; it finds its node's folder in CARDTIME_RAW_DIR
    (raw_dir/<node>/, copied back as a launch's is) and its name in CARDTIME_NODE_NAME, its output goes to
    <node>/log_name. Returns the names of the nodes where it failed (their output says why)."""
    nodes = parse_nodes(profile.nodes)
    raw_dir = Path(raw_dir).resolve()
    env = {k: v for k, v in os.environ.items()}
    started: list[tuple[Node, subprocess.Popen, list[str]]] = []
    try:
        if profile.node_launcher == "srun":
            for node in nodes:
                (raw_dir / node.name).mkdir(parents=True, exist_ok=True)
            srun_args = shlex.split(os.environ.get(SRUN_ARGS_ENV, ""))
            if argv and argv[0] == sys.executable:  # a Python probe: under pyxis the image's Python
                argv = [node_python(srun_args, sys.executable), *argv[1:]]
            # a probe: no marks
            srun = srun_launch_command(len(nodes), str(raw_dir), log_name, argv, srun_args)
            started.append((nodes[0], _start_local(srun, env, raw_dir / f"{log_name}.srun.log"), srun))
        for rank, node in enumerate(nodes if profile.node_launcher != "srun" else ()):
            (raw_dir / node.name).mkdir(parents=True, exist_ok=True)
            node_env = {**env, "CARDTIME_RAW_DIR": str(raw_dir / node.name), "CARDTIME_NODE_NAME": node.name}
            started.append(
                (
                    node,
                    _start(
                        node, rank, list(argv), node_env, raw_dir / node.name / log_name, profile.ssh_config
                    ),
                    list(argv),
                )
            )
        deadline = time.monotonic() + timeout_s
        while any(p.poll() is None for _, p, _ in started) and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        for _, proc, _ in started:
            if proc.poll() is None:
                kill_group(proc)
        for node, _, _ in started[1:] if profile.node_launcher == "ssh" else ():
            _copy_back(node, profile.ssh_config, raw_dir, [node.name])
    return [node.name for node, proc, _ in started if proc.returncode != 0]


def _logs(raw_dir: Path, nodes: Sequence[Node], prefix: str) -> list[Path]:
    """Each node's torchrun log, then its ranks' (c10d numbers the ranks as the nodes join: found, not
    assumed)."""
    out = []
    for node in nodes:
        ranks = sorted(
            (raw_dir / node.name).glob(f"{prefix}rank*.log"),
            key=lambda p: int(p.stem.rsplit("rank", 1)[1]) if p.stem.rsplit("rank", 1)[1].isdigit() else 0,
        )
        out += [raw_dir / node.name / f"{prefix}torchrun.log", *ranks]
    return out


def _start(
    node: Node, rank: int, command: list[str], env: dict[str, str], log_path: Path, ssh_config: str
) -> subprocess.Popen:
    """The first node's torchrun here; another node's through ssh, its environment on the command line (in a
    containerised run, `docker run` of the same image there: suite/cluster/node_container.py)."""
    if rank == 0:
        return _start_local(command, env, log_path)
    image_run = container_prefix(os.environ)  # a containerised run: the node runs it in the same image
    if image_run:
        name = container_name(
            "cardtime", node.name, log_path.stem, str(os.getpid()), str(time.monotonic_ns())
        )
        remote = container_node_command(image_run, name, os.getcwd(), forwarded_env(env), command)
    else:
        remote = remote_shell_command(os.getcwd(), forwarded_env(env), command)
    argv = node.ssh_argv(ssh_config, tty=True) + [remote]
    return _start_local(argv, dict(os.environ), log_path)


def _start_local(argv: list[str], env: dict[str, str], log_path: Path) -> subprocess.Popen:
    """A child in its own session (a timeout kills all below it), its output appended to log_path."""
    with open(log_path, "ab") as log:
        log.write(f"$ {shlex.join(argv)}\n".encode())
        log.flush()
        return subprocess.Popen(
            argv,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
            preexec_fn=functools.partial(procs.die_with_parent, expected_parent=os.getpid()),
        )


class TimedOut(LaunchError):
    """_wait's timeout, the ranks already asked: run_across_nodes reads their answers once copied back."""


def _wait(
    started,
    start: float,
    timeout_s: float | None,
    on_poll,
    module: str,
    logs: Callable[[], list[Path]],
    expendable: set[str] = frozenset(),
    ask_ranks: Callable[[], object] | None = None,
):
    """Until every node's torchrun has exited; the first that failed (after the others got PEER_GRACE_S to
    notice and stop by themselves), or None; an expendable node's failure is neither. A timeout asks the ranks
    where they are (`ask_ranks`: the hang forensics), kills every node's and raises TimedOut."""
    failed = None
    failed_at = None
    while True:
        running = [s for s in started if s[1].poll() is None]
        if failed is None:
            failed = next(
                (s for s in started if s[1].returncode not in (None, 0) and s[0].name not in expendable), None
            )
            failed_at = time.monotonic() if failed else None
        if not running:
            return failed
        if failed is not None and time.monotonic() - failed_at > PEER_GRACE_S:
            for _, proc, _ in running:
                kill_group(proc)
            return failed
        if timeout_s is not None and time.monotonic() - start > timeout_s:
            if ask_ranks is not None:
                ask_ranks()  # each rank answers beside its hello, on its node's disk
            for _, proc, _ in started:
                kill_group(proc)
            raise TimedOut(
                f"{module} timed out after {timeout_s:.0f} s on {len(started)} nodes "
                f"({', '.join(s[0].name for s in running)} still running)",
                command=started[0][2],
                log_tail=log_tail(logs()),
            )
        if on_poll is not None:
            on_poll()
        time.sleep(0.2)


def _copy_back(node: Node, ssh_config: str, raw_dir: Path, names: list[str]) -> None:
    """What `node` wrote under raw_dir/<names> on its own disk, into the same place here; files already here
    are kept (on shared storage that is every file: nothing is copied)."""
    listing = (
        f"cd {shlex.quote(str(raw_dir))} && tar -cf - --ignore-failed-read {shlex.join(names)} 2>/dev/null"
    )
    try:
        pack = subprocess.Popen(
            node.ssh_argv(ssh_config) + [listing], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
        )
        subprocess.run(
            ["tar", "-xf", "-", "--skip-old-files", "-C", str(raw_dir)],
            stdin=pack.stdout,
            capture_output=True,
            timeout=COPY_BACK_TIMEOUT_S,
        )
        pack.wait(timeout=COPY_BACK_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return  # the launch's own outcome is what the stage reports; missing rows show up there


def check_reachable(nodes: Sequence[Node], ssh_config: str = "", timeout_s: float = 30.0) -> None:
    """Every node but the first (this one) answers over ssh, before any stage starts; else NodesError naming
    it."""
    for node in nodes[1:]:
        argv = (
            node.ssh_argv(ssh_config)[:1]
            + ["-o", "ConnectTimeout=10"]
            + node.ssh_argv(ssh_config)[1:]
            + ["true"]
        )
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise NodesError(
                f"node {node.name}: ssh did not answer within {timeout_s:.0f} s: check the address "
                "and that sshd runs there"
            ) from None
        if done.returncode != 0:
            said = (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1]
            raise NodesError(
                f"node {node.name}: unreachable over ssh ({said}): fix the name or address, install "
                "this node's key there (ssh-copy-id), or pass --ssh-config"
            )
