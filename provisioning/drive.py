"""`make remote`: drive a group of rented hosts from the laptop, step by step — one host (HOST=) is a group of
one, several (HOSTS=a,b / HOSTFILE=) a group of many (provisioning/group.py).

    python -m provisioning remote --host root@203.0.113.7:2222 --profile nccl-gpu --archive s3://b/cardtime
    python -m provisioning remote --hosts root@gpu-a,root@gpu-b --runtime host --node-ssh-config ~/.ssh/c

 1 preflight  every host connected (HOST resolved by `ssh -G`; an endpoint without SFTP refused), probed
              (GPUs/driver/disk/docker/python) and judged on its own, then against the first (GPUs, model,
              driver, Python, the remote folder), then every other node reached from the first over ssh
              without a password; refused in one line naming the host and the fix
 2 code       under the first host's run lock (and each other node's, hostlock.py): exactly the local HEAD on
              every host (a git clone of origin, else a bundle over SFTP, else HEAD's files; codesync.py), or
              in the image (RUNTIME=docker)
 3 runtime    inside the detached job, so a sleeping laptop loses nothing: RUNTIME=host a venv keyed by
              pyproject.toml's hash on every host (the others' over ssh from the first); RUNTIME=docker the
              image built (or IMAGE= pulled) on the first host, carried to the others, its ID checked equal;
              then (GPU profiles) the check that torch there sees every GPU on every host (cuda_check.py)
 4 run        detached on the first host (tmux or setsid); followed through progress.json and its log; the
              same `make remote` re-attaches; a finished run never fetched blocks a new one (jobchoice.py)
 5 fetch      the first host's run directory (every node's raw output under raw/<stage>/<node>/) to
              runs/<run-id>/ (resumable, sizes and sha256 checked)
 6 report     rendered locally (python -m reports), before the archive so that the archive carries it
 7 archive    ARCHIVE=s3://bucket/prefix → prefix/<run-id>/ from the laptop (credentials stay here)

Exit status: the run's (0 all verdicts pass/warn/skip, 1 a fail verdict), 2 when a step could not be done.
"""

from __future__ import annotations

import dataclasses
import getpass
import posixpath
import socket
from dataclasses import asdict
from typing import Any

from provisioning.cluster import image as cluster_image
from provisioning.cluster.node_lines import (
    other_nodes_setup,
    release_node_locks_lines,
    suite_node_args,
    touch_node_locks_command,
)
from provisioning.cluster.nodes import NodeShape
from provisioning.group import (
    Group,
    Member,
    NodeRunSettings,
    node_world,
    nodes_runtime,
    probe,
    release_locks,
    runtime_problem,
)
from provisioning.job import codesync, hostlock, jobchoice, jobs
from provisioning.job.lifecycle import run_job, suite_args
from provisioning.runtime import cuda_check, efa, host_kernel_log, hostruntime, remote_docker
from provisioning.runtime.suite_container import host_user
from provisioning.session.connection import Remote
from provisioning.session.login import connect_for_transfers, host_key_record
from provisioning.session.options import RemoteOptions, needs_gpu, world_problem
from provisioning.session.shell import quote
from provisioning.session.steps import Steps
from suite import run_env

ENV_FILE = "nccl.env"


@dataclasses.dataclass
class JobParts:
    """What the runtime's preparation hands the job: where it runs, its set-up, the suite's argv, its
    environment, and how the code travelled (for the run's record)."""

    code_dir: str
    setup: str
    argv: list[str]
    env: dict[str, str]
    shipped_by: str


def drive(opts: RemoteOptions, steps: Steps) -> int:
    """make remote HOST= or HOSTS=: preflight, code, runtime, the run detached on the first host, follow,
    fetch, report, archive."""
    if len(opts.hosts) > 1:  # their runtime is settled before their preflight, which judges each for it
        if problem := runtime_problem(opts):
            steps.say(f"REFUSED: {problem}")
            return 2
        opts = dataclasses.replace(opts, runtime=nodes_runtime(opts))
    settings = opts.nodes_run or NodeRunSettings()
    local = codesync.local_checkout(opts.repo, allow_dirty=opts.allow_dirty)
    group = probe(opts, steps)
    if group is None:
        return 2
    remote = group.remote
    try:
        opts = dataclasses.replace(opts, runtime=group.runtime(opts))
        if not group.single:
            shape = NodeShape.of(group.first.facts)
            steps.say(
                f"{len(group.members)} nodes agree: {shape.gpus} × {shape.model}, driver {shape.driver}, "
                f"Python {shape.python}"
            )
            if problem := world_problem(node_world(opts, settings), shape.gpus):
                steps.say(f"REFUSED: {problem}")
                return 2
            reached = group.reach(settings.ssh_config)
            if not reached.ok:
                steps.say(f"REFUSED: {next(iter(reached.failed.values()))}")
                return 2
            steps.say(f"{group.labels[0]} reaches {', '.join(group.labels[1:])} over ssh without a password")
        key = jobs.JobKey(
            commit=local.commit,
            profile=opts.profile,
            stages=opts.stages,
            runtime=opts.runtime,
            nodes="" if group.single else ",".join(group.labels),
            **jobs.run_settings(node_world(opts, settings)),
        )
        return run_job(
            remote,
            opts,
            group.base,
            key,
            run_record(opts, group, local),
            steps,
            lambda resume_dir: start(opts, group, local, key, resume_dir, settings, steps),
        )
    finally:
        remote.close()


def run_record(opts: RemoteOptions, group: Group, local: codesync.LocalCheckout) -> dict[str, Any]:
    """remote.json's start: the host(s), the host key checked, the commit and settings, what preflight saw."""
    record: dict[str, Any] = {
        "host": opts.host.label,
        "host_key": host_key_record(group.remote),
        "commit": local.commit,
        "branch": local.branch,
        "dirty": local.dirty,
        "profile": opts.profile,
        "stages": opts.stages,
        "runtime": opts.runtime,
        "host_facts": asdict(group.first.facts),
    }
    if not group.single:
        record.update(hosts=group.labels, node_facts={m.spec.label: asdict(m.facts) for m in group.others})
    return record


def put_env_file(remote: Remote, job_dir: str, settings: dict[str, str]) -> str:
    """NCCL_ENV='s settings as the job's nccl.env (the job's folder is mounted in the container at the same
    path); its path on the host."""
    path = f"{job_dir}/{ENV_FILE}"
    remote.run(["mkdir", "-p", "--", job_dir], what="cannot create the job folder")
    remote.write_text(path, run_env.text_of(settings))
    return path


def start(
    opts: RemoteOptions,
    group: Group,
    local: codesync.LocalCheckout,
    key: jobs.JobKey,
    resume_dir: str | None,
    settings: NodeRunSettings,
    steps: Steps,
) -> dict[str, Any]:
    """Under the first host's run lock (and each other node's): the runtime's parts and the job started
    detached on the first host; the job gives the locks back when it ends (the laptop does, if the start
    fails)."""
    remote, first = group.remote, group.first
    base, job_id = group.base, jobs.new_job_id(key)
    job_dir = f"{base}/jobs/{job_id}"
    holder = {
        "by": f"{getpass.getuser()}@{socket.gethostname()}",
        "commit": key.commit,
        "profile": key.profile,
    }
    lock = hostlock.acquire(remote, base, job_id, holder, role="host" if group.single else "node")
    started, node_locks = False, []
    try:
        # Under the lock, look once more: another laptop may have started (or finished) a run between our
        # first look and the lock.
        if jobchoice.choose(jobs.every_job(remote, base), key, opts.new_run).action != "start":
            raise hostlock.HostBusy(
                remote.label,
                "another run was started on the host a moment ago",
                hint="rerun the same make remote: it re-attaches or says what holds the host",
            )
        node_locks = group.lock_others(opts, job_id, holder)
        args = suite_args(
            node_world(opts, settings), base, f"{job_dir}/LAST", resume_dir, gpus=len(first.facts.gpus)
        )
        if not group.single and not resume_dir:  # a resumed run keeps the nodes its manifest names
            args += suite_node_args(group.labels, settings)
        if opts.nccl_env and not resume_dir:  # a resumed run sets its manifest's settings again
            args += ["--env-file", put_env_file(remote, job_dir, opts.nccl_env)]
        prepare = docker_job_parts if opts.runtime == "docker" else host_job_parts
        parts = prepare(opts, group, local, job_dir, args, settings, steps)
        steps.begin("run", f"starting {opts.profile} {opts.stages or 'all stages'}{group.on_nodes} detached")
        use_tmux = first.facts.tmux if opts.detach is None else opts.detach == "tmux"
        others = [m.node for m in group.others]
        jobs.start(
            remote,
            base,
            key,
            parts.code_dir,
            parts.argv,
            use_tmux=use_tmux,
            job_id=job_id,
            env=parts.env,
            setup=parts.setup,
            teardown=release_node_locks_lines(others, base, job_id, settings.ssh_config),
            heartbeat=touch_node_locks_command(others, base, job_id, settings.ssh_config),
            extra={
                "code_shipped_by": parts.shipped_by,
                "resumes": resume_dir,
                "host_key": host_key_record(remote),
            },
        )
        started = True
    finally:
        if not started:
            release_locks(opts, node_locks)
            hostlock.release(remote, lock)
    st = jobs.wait_started(remote, base, job_id)
    how_to_watch = f"tmux -L {jobs.TMUX_SOCKET} attach -t cardtime-{job_id}" if use_tmux else "setsid"
    where = "" if group.single else f" on {first.spec.label}"
    steps.say(
        f"job {job_id} started{where} (pid {st.pid}, {how_to_watch}); closing the laptop now loses nothing"
    )
    return st.job or {"job_id": job_id, "code_dir": parts.code_dir, "code_shipped_by": parts.shipped_by}


def node_setup(member: Member, venv: str, code_dir: str, check_dir: str, line, gpu: bool) -> str:
    """One host's own set-up: its venv (hostruntime.py), then on GPU profiles the check that torch sees its
    GPUs (its output and refusal under check_dir: the job's folder on the first host, a node-<name>/ in it
    elsewhere)."""
    text = hostruntime.setup_script(venv, code_dir, python=member.facts.python_exe or "python3", line=line)
    if gpu:
        check = cuda_check.host_python_argv(
            f"{venv}/bin/python", gpus_seen=len(member.facts.gpus), driver=member.facts.driver
        )
        text = f"mkdir -p -- {quote(check_dir)}\n" + text + cuda_check.job_step(check, check_dir)
    return text


def ship_code(remote: Remote, member: Member, group: Group, local, steps: Steps) -> tuple[str, str]:
    """HEAD on one host (a clone, a bundle, or on a host without git its files): (the folder, how)."""
    ship = codesync.ship if member.facts.git else codesync.ship_files
    code_dir, how = ship(remote, local, group.base, say=steps.say)
    shipped = "already there" if how == "reused" else "shipped by " + how
    steps.say(group.said(member, f"{code_dir}: {shipped}"))
    return code_dir, how


def host_job_parts(
    opts, group: Group, local, job_dir: str, args: list[str], settings, steps: Steps
) -> JobParts:
    """RUNTIME=host: the code on every host and each other node's set-up script put there; the set-up makes
    every host's venv (the first's, then the others' over ssh from it) and checks its GPUs."""
    first, gpu = group.first, needs_gpu(opts.profile)
    line = first.decision.cuda_line if gpu else None  # a CPU profile keeps pip's own torch
    venv = hostruntime.venv_dir(
        group.base, hostruntime.pyproject_key(local.root, local.commit), first.facts.python, line
    )
    steps.begin("code", f"code at {local.commit[:12]} ({local.branch}){group.on_nodes}")
    code_dir, how = ship_code(group.remote, first, group, local, steps)
    for m in group.others:  # each node's code, and the set-up the first node's job runs there over ssh
        node_remote = connect_for_transfers(dataclasses.replace(opts, host=m.spec))
        try:
            code_dir, _ = ship_code(node_remote, m, group, local, steps)
            node_remote.run(["mkdir", "-p", "--", job_dir])
            node_remote.write_text(
                f"{job_dir}/setup-{m.node.name}.sh",
                node_setup(m, venv, code_dir, f"{job_dir}/node-{m.node.name}", line, gpu),
                mode=0o755,
            )
        finally:
            node_remote.close()
    steps.begin("runtime", "RUNTIME=host" + ("" if group.single else " on every node"))
    # The first host's own check writes jobs/<id>/refused, as one host's does; then the others'.
    setup = node_setup(first, venv, code_dir, job_dir, line, gpu)
    setup += other_nodes_setup(job_dir, [m.node for m in group.others], settings.ssh_config)
    steps.say(
        f"the job installs the venv {venv} first"
        + (" on every node" if not group.single else "")
        + " unless it is ready (first time on this host: minutes)"
    )
    if gpu:
        steps.say("then it checks that torch there sees every GPU, before any stage")
    env = {
        "PYTHONUNBUFFERED": "1",
        **hostruntime.host_job_environment(first.facts),
        # The checkout first on the path for the runner and every torchrun worker it starts.
        "PYTHONPATH": code_dir,
        "CARDTIME_COMMIT": local.commit,  # the manifest's commit where the code has no .git
    }
    shipped_by = how if group.single else "every node"
    return JobParts(code_dir, setup, [f"{venv}/bin/python", "-m", "suite", *args], env, shipped_by)


def docker_job_parts(opts, group: Group, local, job_dir: str, args: list[str], settings, steps) -> JobParts:
    """RUNTIME=docker / IMAGE=: the code travels in the image. The set-up makes the image on the first host
    (and on several, carries or pulls it to the others and checks every node's image ID), reads the host's
    kernel log for the health stage, checks the GPUs in the image on every host; the suite runs in it on
    the first."""
    remote, first, gpu = group.remote, group.first, needs_gpu(opts.profile)
    steps.begin("code", f"code at {local.commit[:12]} ({local.branch}): in the image{group.on_nodes}")
    steps.begin("runtime", "RUNTIME=docker" + ("" if group.single else " on every node"))
    line = first.decision.cuda_line if gpu and not opts.image else None
    image, setup = remote_docker.image_setup(remote, local, opts.image, group.base, say=steps.say, line=line)
    others = [m.node for m in group.others]
    if others:
        setup += cluster_image.same_image_setup(
            image, first.node.name, others, settings.ssh_config, job_dir, pulled=bool(opts.image)
        )
        how = "has every node pull it" if opts.image else "carries it to " + ", ".join(n.name for n in others)
        steps.say(f"then it {how} and checks that every node holds the same image ID, before any stage")
    setup += host_kernel_log.capture_lines(job_dir)  # the first host's: the other nodes' stay unread
    user = host_user(first.facts.uid, first.facts.gid)
    job_id = posixpath.basename(job_dir)
    if gpu:  # torch in the image must see every GPU on every host: the first host's check, then the others'
        checks = [
            (
                m.node,
                cuda_check.image_argv(
                    image, job_id, gpus_seen=len(m.facts.gpus), driver=m.facts.driver, user=user
                ),
            )
            for m in group.members
        ]
        setup += cuda_check.job_step(checks[0][1], job_dir)
        if others:
            setup += cluster_image.nodes_gpu_check_lines(checks[1:], settings.ssh_config, job_dir)
        steps.say("then it checks that torch in the image sees every GPU, before any stage")
    remote.run(["mkdir", "-p", "--", f"{group.base}/runs", job_dir])
    runs_dir, rdma = f"{group.base}/runs", all(m.facts.rdma_devices for m in group.members)
    fabric = efa.for_container(first.facts.efa_devices, first.facts.efa_folders) if gpu else None
    fabric = fabric if isinstance(fabric, efa.Efa) else None  # a refusal was preflight's (preflight.decide)
    if fabric:
        steps.say(
            f"EFA: {len(fabric.devices)} device(s); the container gets {', '.join(fabric.folders)} read-only "
            "and FI_PROVIDER=efa"
        )
    if others:  # the suite inside reaches the other nodes with the host's keys
        setup += cluster_image.ssh_client_lines(image, first.node.name, job_dir)
        argv = cluster_image.first_node_run_argv(
            image,
            args,
            job_id=job_id,
            runs_dir=runs_dir,
            job_dir=job_dir,
            home=first.facts.home,
            ssh_config=settings.ssh_config,
            gpus=gpu,
            user=user,
            rdma=rdma,
            efa=fabric,
        )
    else:
        argv = remote_docker.run_argv(
            image,
            job_id=job_id,
            job_dir=job_dir,
            runs_dir=runs_dir,
            suite_args=args,
            gpus=gpu,
            user=user,
            rdma=rdma,
            efa=fabric,
        )
    return JobParts(group.base, setup, argv, {"PYTHONUNBUFFERED": "1"}, "the image")
