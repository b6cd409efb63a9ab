"""`make remote HOSTS=a,b`: drive a multi-node run from the laptop, step by step (one host's: remote.py).

   python -m provisioning remote --hosts root@gpu-a,root@gpu-b --runtime host --node-ssh-config ~/.ssh/cluster

1 preflight  every node probed and judged on its own (preflight.py), then against the first (cluster/nodes.py:
             GPUs, model, driver, Python, and the remote folder: the per-node torchrun runs the first node's
             paths on every node); then, from the first node, every other node over ssh without a password
             (the per-node torchrun and mpirun need it): a node it cannot reach is refused with the fix
2 code       RUNTIME=host: exactly the local HEAD on every node (codesync.py; on shared storage the second
             node
             finds it there); RUNTIME=docker: in the image (HEAD's files sent to the first node to build it)
3 runtime    inside the detached job. RUNTIME=host: the venv on every node, the first node's, then each
             other node's over ssh from the first (on shared storage they find the first node's ready);
             GPU profiles check torch sees every GPU on every node. RUNTIME=docker / IMAGE=: the image built
             (or pulled) on the first node, carried (or pulled) to the others, every node's image ID checked
             equal (cluster/image.py), then on GPU profiles the GPU check in the image on every node; the
             suite runs in it on the first node, each other node's commands in the same image
             (suite/cluster/node_container.py)
4 run        `python -m suite run --nodes a,b …` detached on the first node (jobs.py), followed and
             re-attached as one host's run is; the job's key includes the node list
5–7          one fetch of the first node's run directory (every node's raw output is under
             raw/<stage>/<node>/: suite/cluster/multilaunch.py copies it there), report, archive: remote.py's
"""

from __future__ import annotations

import dataclasses
import getpass
import posixpath
import socket
from dataclasses import asdict, dataclass
from typing import Any

from provisioning.cluster import image as cluster_image
from provisioning.cluster.nodes import SSH_CONNECT_TIMEOUT_S, NodeShape, cluster_problems, on_node, reach_argv
from provisioning.job import codesync, hostlock, jobs
from provisioning.job.lifecycle import run_job, suite_args
from provisioning.runtime import cuda_check, host_kernel_log, hostruntime
from provisioning.runtime.suite_container import host_user
from provisioning.session import preflight
from provisioning.session.connection import Remote, RemoteError
from provisioning.session.login import connect_for_transfers, host_key_record, run_preflight
from provisioning.session.options import needs_gpu, world_problem
from provisioning.session.shell import given_flags, join, quote
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
class Probed:
    spec: Any
    """provisioning.session.hosts.HostSpec"""
    facts: preflight.HostFacts
    decision: preflight.Decision

    @property
    def node(self) -> Node:
        return parse_node(self.spec.label)


def cluster_runtime(opts) -> str:
    """RUNTIME=docker (or IMAGE=): the image on every node; else (unset too) each node's Python in a venv."""
    return "docker" if opts.runtime == "docker" or opts.image else (opts.runtime or "host")


def runtime_problem(opts) -> str | None:
    """IMAGE= with RUNTIME=host contradict each other; any other runtime preflight judges."""
    if opts.image and opts.runtime == "host":
        return f"IMAGE={opts.image} runs in Docker but RUNTIME=host was asked: drop one of them"
    return None


def base_problems(nodes: list[Probed]) -> list[str]:
    """The per-node torchrun runs the first node's checkout and venv paths on every node: the remote folder
    must agree."""
    first = nodes[0]
    return [
        f"node {p.spec.label}: remote folder {p.facts.base} where {first.spec.label} has {first.facts.base}: "
        f"pass REMOTE_DIR=<one absolute path> that every node can create"
        for p in nodes[1:]
        if p.facts.base != first.facts.base
    ]


def login_problems(nodes: list[Probed], runtime: str) -> list[str]:
    """RUNTIME=docker across nodes runs every node's container as the first node's login (its uid:gid, its
    account mapped in: cluster/image.py), so each node's login must be that uid:gid, root or not: else the run
    folders on a node would belong to a user it does not have. Rented nodes of one image give every node the
    same login."""
    if runtime != "docker":
        return []
    first = nodes[0]
    want = (first.facts.uid, first.facts.gid)
    return [
        f"node {p.spec.label}: RUNTIME=docker across nodes runs every node's container as "
        f"{first.spec.label}'s "
        f"uid:gid {want[0]}:{want[1]}, but this login is {p.facts.uid}:{p.facts.gid}: log in with the same "
        f"user "
        "on every node (HOSTS=user@…), or use RUNTIME=host"
        for p in nodes[1:]
        if None not in want and (p.facts.uid, p.facts.gid) != want
    ]


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


def check_reach(first_remote: Remote, nodes: list[Probed], ssh_config: str) -> list[str]:
    """From the first node, `ssh <node> true` for every other node; one problem line per node it cannot
    reach."""
    out = []
    for p in nodes[1:]:
        r = first_remote.run(
            reach_argv(p.node, ssh_config) + ["true"], check=False, timeout=SSH_CONNECT_TIMEOUT_S + 20
        )
        if r.exit_code != 0:
            said = ((r.stderr or r.stdout).strip().splitlines() or [f"exit code {r.exit_code}"])[-1]
            out.append(reach_problem(nodes[0].spec.label, p.node, said, ssh_config))
    return out


def node_world(opts, settings: NodeRunSettings):
    """The options with NPROC= of HOSTS= (the nodes' settings) as the run's processes per node."""
    return dataclasses.replace(opts, nproc=settings.nproc or opts.nproc)


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


def node_setup(probed: Probed, venv: str, code_dir: str, check_dir: str, line, gpu: bool) -> str:
    """One node's own set-up: its venv (hostruntime.py), then on GPU profiles the check that torch sees its
    GPUs (its output and refusal under check_dir: the job's folder on the first node, a node-<name>/ in it
    elsewhere)."""
    text = hostruntime.setup_script(venv, code_dir, python=probed.facts.python_exe or "python3", line=line)
    if gpu:
        check = cuda_check.host_python_argv(
            f"{venv}/bin/python", gpus_seen=len(probed.facts.gpus), driver=probed.facts.driver
        )
        text = f"mkdir -p -- {quote(check_dir)}\n" + text + cuda_check.job_step(check, check_dir)
    return text


def preflight_nodes(opts, steps) -> list[Probed] | None:
    """Every node probed and judged; None (its REFUSED line said) at the first that cannot take part."""
    probed: list[Probed] = []
    for spec in opts.hosts:
        steps.begin("preflight", f"checking node {spec.label}")
        node_opts = dataclasses.replace(opts, host=spec)
        try:
            remote = connect_for_transfers(node_opts)
        except RemoteError as e:
            fix = (
                e.hint
                or "check the address and port, the key (KEY=) or SSH_CONFIG=, or leave the node out of "
                "HOSTS="
            )
            steps.say(f"REFUSED: node {spec.label}: {e.what}: {fix}")
            return None
        try:
            facts, decision = run_preflight(remote, node_opts, steps)
        finally:
            remote.close()
        if decision.problems:
            steps.say(f"REFUSED: node {spec.label}: {decision.problems[0]}")
            return None
        probed.append(Probed(spec, facts, decision))
    problems = (
        cluster_problems([(p.spec.label, p.facts) for p in probed], opts.runtime)
        + base_problems(probed)
        + login_problems(probed, opts.runtime)
    )
    if problems:
        steps.say(f"REFUSED: {problems[0]}")
        return None
    return probed


def cluster_main(opts, steps) -> int:
    """make remote HOSTS=…: preflight, code, runtime, the run detached on the first node, follow, fetch,
    report."""
    problem = runtime_problem(opts)
    if problem:
        steps.say(f"REFUSED: {problem}")
        return 2
    opts = dataclasses.replace(opts, runtime=cluster_runtime(opts))
    settings = opts.nodes_run or NodeRunSettings()
    local = codesync.local_checkout(opts.repo, allow_dirty=opts.allow_dirty)
    probed = preflight_nodes(opts, steps)
    if probed is None:
        return 2
    shape = NodeShape.of(probed[0].facts)
    steps.say(
        f"{len(probed)} nodes agree: {shape.gpus} × {shape.model}, driver {shape.driver}, Python "
        f"{shape.python}"
    )
    problem = world_problem(node_world(opts, settings), shape.gpus)
    if problem:
        steps.say(f"REFUSED: {problem}")
        return 2
    labels = [p.spec.label for p in probed]
    remote = connect_for_transfers(opts)  # opts.host is the first node
    record: dict[str, Any] = {
        "host": opts.host.label,
        "hosts": labels,
        "host_key": host_key_record(remote),
        "commit": local.commit,
        "branch": local.branch,
        "dirty": local.dirty,
        "profile": opts.profile,
        "stages": opts.stages,
        "runtime": opts.runtime,
        "host_facts": asdict(probed[0].facts),
        "node_facts": {p.spec.label: asdict(p.facts) for p in probed[1:]},
    }
    try:
        unreachable = check_reach(remote, probed, settings.ssh_config)
        if unreachable:
            steps.say(f"REFUSED: {unreachable[0]}")
            return 2
        steps.say(f"{probed[0].spec.label} reaches {', '.join(labels[1:])} over ssh without a password")
        base = probed[0].facts.base
        key = jobs.JobKey(
            commit=local.commit,
            profile=opts.profile,
            stages=opts.stages,
            runtime=opts.runtime,
            nodes=",".join(labels),
            **jobs.run_settings(node_world(opts, settings)),
        )
        return run_job(
            remote,
            opts,
            base,
            key,
            record,
            steps,
            lambda resume_dir: start_cluster_job(
                remote, opts, probed, local, key, resume_dir, settings, steps, gpu=needs_gpu(opts.profile)
            ),
        )
    finally:
        remote.close()


def start_cluster_job(
    remote: Remote,
    opts,
    probed: list[Probed],
    local: codesync.LocalCheckout,
    key: jobs.JobKey,
    resume_dir: str | None,
    settings: NodeRunSettings,
    steps,
    *,
    gpu: bool,
) -> dict[str, Any]:
    """Under the first node's run lock: the runtime's parts (host: the code on every node and each one's
    set-up script; docker: the image's build context on the first node), and the job started detached on the
    first node, whose set-up prepares every node (venvs, or one image carried or pulled and its ID checked)
    first."""
    first = probed[0]
    base, job_id = first.facts.base, jobs.new_job_id(key)
    job_dir = f"{base}/jobs/{job_id}"
    holder = {
        "by": f"{getpass.getuser()}@{socket.gethostname()}",
        "commit": key.commit,
        "profile": key.profile,
    }
    lock = hostlock.acquire(remote, base, job_id, holder, role="node")
    started, node_locks = False, []
    try:
        node_locks = lock_other_nodes(opts, probed, job_id, holder)

        args = suite_args(
            node_world(opts, settings), base, f"{job_dir}/LAST", resume_dir, gpus=len(first.facts.gpus)
        )
        if not resume_dir:  # a resumed run keeps the nodes its manifest names
            args += suite_node_args([p.spec.label for p in probed], settings)
        prepare = docker_job_parts if opts.runtime == "docker" else host_job_parts
        code_dir, setup, argv, env = prepare(
            remote, opts, probed, local, job_dir, args, settings, steps, gpu=gpu
        )
        steps.begin(
            "run", f"starting {opts.profile} {opts.stages or 'all stages'} on {len(probed)} nodes, detached"
        )
        use_tmux = first.facts.tmux if opts.detach is None else opts.detach == "tmux"
        jobs.start(
            remote,
            base,
            key,
            code_dir,
            argv,
            use_tmux=use_tmux,
            job_id=job_id,
            env=env,
            setup=setup,
            teardown=release_node_locks_lines(
                [p.node for p in probed[1:]], base, job_id, settings.ssh_config
            ),
            heartbeat=touch_node_locks_command(
                [p.node for p in probed[1:]], base, job_id, settings.ssh_config
            ),
            extra={
                "code_shipped_by": "every node" if opts.runtime == "host" else "the image",
                "resumes": resume_dir,
                "host_key": host_key_record(remote),
            },
        )
        started = True
    finally:
        if not started:
            release_node_locks(opts, node_locks)
            hostlock.release(remote, lock)
    st = jobs.wait_started(remote, base, job_id)
    steps.say(
        f"job {job_id} started on {first.spec.label} (pid {st.pid}); closing the laptop now loses nothing"
    )
    return st.job or {"job_id": job_id, "code_dir": code_dir}


def lock_other_nodes(opts, probed: list[Probed], job_id: str, holder: dict[str, Any]) -> list:
    """Every other node's run lock for this job too, so that a run already on any node (one host's, or another
    multi-node run's) refuses this one naming that node; on a busy node the locks taken are given back."""
    taken: list[tuple[Probed, hostlock.Lock]] = []
    try:
        for p in probed[1:]:
            node_remote = connect_for_transfers(dataclasses.replace(opts, host=p.spec))
            try:
                taken.append((p, hostlock.acquire(node_remote, p.facts.base, job_id, holder, role="node")))
            finally:
                node_remote.close()
    except BaseException:
        release_node_locks(opts, taken)
        raise
    return taken


def release_node_locks(opts, taken: list) -> None:
    """A start that failed gives the other nodes' locks back (each only while still this job's)."""
    for p, lock in taken:
        try:
            node_remote = connect_for_transfers(dataclasses.replace(opts, host=p.spec))
        except RemoteError:
            continue  # the lock goes stale by itself (hostlock.LOCK_STALE_S)
        try:
            hostlock.release(node_remote, lock)
        finally:
            node_remote.close()


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


def host_job_parts(
    remote: Remote,
    opts,
    probed: list[Probed],
    local: codesync.LocalCheckout,
    job_dir: str,
    args: list[str],
    settings: NodeRunSettings,
    steps,
    *,
    gpu: bool,
):
    """RUNTIME=host: the code on every node and each other node's set-up script put there; (the code folder,
    the set-up preparing every node's venv, the suite's argv in the first node's venv, its environment)."""
    first = probed[0]
    base = first.facts.base
    line = first.decision.cuda_line if gpu else None  # a CPU profile keeps pip's own torch
    venv = hostruntime.venv_dir(
        base, hostruntime.pyproject_key(local.root, local.commit), first.facts.python, line
    )
    steps.begin("code", f"code at {local.commit[:12]} ({local.branch}) on {len(probed)} nodes")
    code_dir = ""
    for p in probed:
        node_remote = remote if p is first else connect_for_transfers(dataclasses.replace(opts, host=p.spec))
        try:
            ship = codesync.ship if p.facts.git else codesync.ship_files
            code_dir, how = ship(node_remote, local, base, say=steps.say)
            steps.say(
                f"node {p.spec.label}: {code_dir}: "
                f"{'already there' if how == 'reused' else 'shipped by ' + how}"
            )
            if p is not first:  # its set-up, which the first node's job runs over ssh
                node_remote.run(["mkdir", "-p", "--", job_dir])
                node_remote.write_text(
                    f"{job_dir}/setup-{p.node.name}.sh",
                    node_setup(p, venv, code_dir, f"{job_dir}/node-{p.node.name}", line, gpu),
                    mode=0o755,
                )
        finally:
            if p is not first:
                node_remote.close()
    steps.begin("runtime", "RUNTIME=host on every node")
    # The first node's own check writes jobs/<id>/refused, as one host's does; then the others'.
    setup = node_setup(first, venv, code_dir, job_dir, line, gpu)
    setup += other_nodes_setup(job_dir, [p.node for p in probed[1:]], settings.ssh_config)
    steps.say(f"the job prepares the venv {venv} on every node first (unless ready; first time: minutes)")
    env = {
        "PYTHONUNBUFFERED": "1",
        **hostruntime.host_job_environment(first.facts),
        "PYTHONPATH": code_dir,
        "CARDTIME_COMMIT": local.commit,
    }
    return code_dir, setup, [f"{venv}/bin/python", "-m", "suite", *args], env


def docker_job_parts(
    remote: Remote,
    opts,
    probed: list[Probed],
    local: codesync.LocalCheckout,
    job_dir: str,
    args: list[str],
    settings: NodeRunSettings,
    steps,
    *,
    gpu: bool,
):
    """RUNTIME=docker / IMAGE=: the code travels in the image (cluster/image.py); (the job's folder, the
    set-up making the image on the first node, carrying or pulling it to the others and checking every node's
    image ID, then the GPU check on every node and the image's ssh client, the suite's `docker run` on the
    first node, its environment)."""
    from provisioning.runtime.remote_docker import image_setup

    first = probed[0]
    base = first.facts.base
    steps.begin("code", f"code at {local.commit[:12]} ({local.branch}): in the image, on {len(probed)} nodes")
    steps.begin(
        "runtime", f"RUNTIME=docker on every node: {'IMAGE= pulled' if opts.image else 'built on the first'}"
    )
    line = first.decision.cuda_line if gpu and not opts.image else None
    image, setup = image_setup(remote, local, opts.image, base, say=steps.say, line=line)
    setup += host_kernel_log.capture_lines(job_dir)  # the first node's; the others' logs stay unread
    others = [p.node for p in probed[1:]]
    setup += cluster_image.same_image_setup(
        image, first.node.name, others, settings.ssh_config, job_dir, pulled=bool(opts.image)
    )
    how = "has every node pull it" if opts.image else "carries it to " + ", ".join(n.name for n in others)
    steps.say(f"then it {how} and checks that every node holds the same image ID, before any stage")
    user = host_user(first.facts.uid, first.facts.gid)
    if gpu:  # torch in the image must see every GPU on every node: the first node's check, then the others'
        checks = [
            (
                p.node,
                cuda_check.image_argv(
                    image,
                    posixpath.basename(job_dir),
                    gpus_seen=len(p.facts.gpus),
                    driver=p.facts.driver,
                    user=user,
                ),
            )
            for p in probed
        ]
        setup += cuda_check.job_step(checks[0][1], job_dir)
        setup += cluster_image.nodes_gpu_check_lines(checks[1:], settings.ssh_config, job_dir)
    setup += cluster_image.ssh_client_lines(image, first.node.name, job_dir)
    remote.run(["mkdir", "-p", "--", f"{base}/runs", job_dir])
    argv = cluster_image.first_node_run_argv(
        image,
        args,
        job_id=posixpath.basename(job_dir),
        runs_dir=f"{base}/runs",
        job_dir=job_dir,
        home=first.facts.home,
        ssh_config=settings.ssh_config,
        gpus=gpu,
        user=user,
        rdma=all(p.facts.rdma_devices for p in probed),
    )
    return base, setup, argv, {"PYTHONUNBUFFERED": "1"}
