"""`make remote HOST=user@host[:port]`: drive a rented host from the laptop, step by step.

    python -m provisioning remote --host root@203.0.113.7:2222 --profile nccl-gpu --archive s3://b/cardtime

 1 preflight  connect (HOST resolved by `ssh -G`; an endpoint without SFTP refused), report GPUs/driver/
              disk/docker/python; refuse with one line what is missing
 2 code       under the host's run lock (hostlock.py): exactly the local HEAD, a git clone of origin
              (its URL without credentials) if the host reaches it, else a git bundle over SFTP
 3 runtime    RUNTIME=host: a venv keyed by pyproject.toml's hash; RUNTIME=docker: the image built or
              pulled on the host (remote_docker.py), torch of the CUDA line the driver runs; either
              set-up runs first inside the detached job, then (GPU profiles) the check that torch
              there sees every GPU (cuda_check.py), which ends the job with its one line if not
 4 run        detached (tmux or setsid+nohup); followed by job id through progress.json and its log;
              a second `make remote` with the same commit/profile/stages re-attaches instead of
              starting another, and a finished run never fetched blocks a new one (jobchoice.py)
 5 fetch      the run directory to runs/<run-id>/ (resumable, pipelined, sizes and sha256 checked);
              FETCH=<job-id> fetches a given job's run instead of starting one
 6 report     rendered locally (python -m reports), before the archive so that the archive carries it
 7 archive    ARCHIVE=s3://bucket/prefix → prefix/<run-id>/ from the laptop (credentials stay here)

Exit status: the run's (0 all verdicts pass/warn/skip, 1 a fail verdict), 2 when a step could not be done.
"""

from __future__ import annotations

import getpass
import socket
from dataclasses import asdict
from pathlib import Path
from typing import Any

from provisioning.cluster.addrs import master_port_arg, node_addrs_arg
from provisioning.cluster.driver import NodeRunSettings, cluster_main
from provisioning.cluster.nodes import ClusterError, cluster_hosts
from provisioning.job import codesync, hostlock, jobchoice, jobs
from provisioning.job.archive import check_destination
from provisioning.job.finish import report_and_archive
from provisioning.job.lifecycle import follow_and_fetch, run_job, suite_args
from provisioning.runtime import cuda_check, host_kernel_log, hostruntime, remote_docker
from provisioning.runtime.suite_container import host_user
from provisioning.session import preflight
from provisioning.session.connection import Remote
from provisioning.session.hosts import parse_host, unnamed_user_note
from provisioning.session.login import connect_for_transfers, host_key_record, resolve_base, run_preflight
from provisioning.session.options import RemoteOptions, needs_gpu, truthy, validate_stages, world_problem
from provisioning.session.steps import Steps


def start_job(
    remote: Remote,
    opts: RemoteOptions,
    facts: preflight.HostFacts,
    runtime: str,
    local: codesync.LocalCheckout,
    key: jobs.JobKey,
    resume_dir: str | None,
    steps: Steps,
    line=None,
) -> dict[str, Any]:
    """Take the host's run lock, ship the code, prepare the runtime and start the job detached;
    the job gives the lock back when it ends (the laptop does, if the start fails). `line`: the
    CUDA line preflight chose (None: a CPU profile, or IMAGE=)."""
    base = facts.base
    job_id = jobs.new_job_id(key)
    lock = hostlock.acquire(
        remote,
        base,
        job_id,
        {"by": f"{getpass.getuser()}@{socket.gethostname()}", "commit": key.commit, "profile": key.profile},
    )
    started = False
    try:
        # Under the lock, look once more: another laptop may have started (or finished) a run
        # between our first look and the lock.
        again = jobchoice.choose(jobs.every_job(remote, base), key, opts.new_run)
        if again.action != "start":
            raise hostlock.HostBusy(
                remote.label,
                "another run was started on the host a moment ago",
                hint="rerun the same make remote: it re-attaches or says what holds the host",
            )
        steps.begin("code", f"code at {local.commit[:12]} ({local.branch})")
        if runtime == "docker" and not facts.git:  # the image is built from a laptop-side archive of HEAD
            code_dir, how = base, "the image"
            steps.say("no git on the host: the code travels in the image only")
        else:  # a host without git (a container pod) gets HEAD's files as a tar
            ship = codesync.ship if facts.git else codesync.ship_files
            code_dir, how = ship(remote, local, base, say=steps.say)
            steps.say(f"{code_dir}: {'already there' if how == 'reused' else 'shipped by ' + how}")
        gpu = needs_gpu(opts.profile)

        job_dir = f"{base}/jobs/{job_id}"
        args = suite_args(opts, base, f"{job_dir}/LAST", resume_dir, gpus=len(facts.gpus))
        env = {"PYTHONUNBUFFERED": "1"}
        # The runtime's set-up (image build, venv install) runs inside the detached job: minutes
        # to an hour that a sleeping laptop or a dropped link must not cut off.
        steps.begin("runtime", f"RUNTIME={runtime}")
        user = host_user(facts.uid, facts.gid)
        if runtime == "docker":
            image, setup = remote_docker.image_setup(
                remote, local, opts.image, base, say=steps.say, line=line
            )
            setup += host_kernel_log.capture_lines(job_dir)
            remote.run(["mkdir", "-p", "--", f"{base}/runs", job_dir])
            argv = remote_docker.run_argv(
                image,
                job_id=job_id,
                job_dir=job_dir,
                runs_dir=f"{base}/runs",
                suite_args=args,
                gpus=gpu,
                user=user,
                rdma=bool(facts.rdma_devices),
            )
            check = cuda_check.image_argv(
                image, job_id, gpus_seen=len(facts.gpus), driver=facts.driver, user=user
            )
        else:
            venv_line = line if gpu else None  # a CPU profile keeps pip's own torch
            venv = hostruntime.venv_dir(
                base, hostruntime.pyproject_key(local.root, local.commit), facts.python, venv_line
            )
            setup = hostruntime.setup_script(
                venv, code_dir, python=facts.python_exe or "python3", line=venv_line
            )
            steps.say(
                f"the job installs the venv {venv} first unless it is ready (first time on this host: "
                f"minutes)"
            )
            argv = [f"{venv}/bin/python", "-m", "suite", *args]
            check = cuda_check.host_python_argv(
                f"{venv}/bin/python", gpus_seen=len(facts.gpus), driver=facts.driver
            )
            env.update(hostruntime.host_job_environment(facts))
            # The checkout first on the path for the runner and every torchrun worker it starts.
            env["PYTHONPATH"] = code_dir
            env["CARDTIME_COMMIT"] = local.commit  # the manifest's commit where the code has no .git
        if gpu:  # torch in the runtime must see every GPU before the stages spend their timeouts
            setup += cuda_check.job_step(check, job_dir)
            steps.say("then it checks that torch there sees every GPU, before any stage")

        steps.begin("run", f"starting {opts.profile} {opts.stages or 'all stages'} detached")
        use_tmux = facts.tmux if opts.detach is None else opts.detach == "tmux"
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
            extra={"code_shipped_by": how, "resumes": resume_dir, "host_key": host_key_record(remote)},
        )
        started = True
    finally:
        if not started:
            hostlock.release(remote, lock)
    st = jobs.wait_started(remote, base, job_id)
    how_to_watch = f"tmux -L {jobs.TMUX_SOCKET} attach -t cardtime-{job_id}" if use_tmux else "setsid"
    steps.say(f"job {job_id} started (pid {st.pid}, {how_to_watch}); closing the laptop now loses nothing")
    return st.job or {"job_id": job_id, "code_dir": code_dir, "code_shipped_by": how}


def remote_main(opts: RemoteOptions, stream=None) -> int:
    steps = Steps(stream)
    opts.runs_dir = Path(opts.runs_dir).resolve()  # printed paths are absolute: they are clicked on
    if opts.fetch_job:
        return fetch_main(opts, steps)
    opts.stages = validate_stages(opts.stages)
    needs_gpu(opts.profile)  # an unknown profile fails here, before any SSH
    if len(opts.hosts) > 1:
        return cluster_main(opts, steps)
    local = codesync.local_checkout(opts.repo, allow_dirty=opts.allow_dirty)

    steps.begin("preflight", f"checking {opts.host.label}")
    if note := unnamed_user_note(opts.host, opts.ssh_config):
        steps.say(f"note: {note}")
    remote = connect_for_transfers(opts)
    record: dict[str, Any] = {
        "host": opts.host.label,
        "host_key": host_key_record(remote),
        "commit": local.commit,
        "branch": local.branch,
        "dirty": local.dirty,
        "profile": opts.profile,
        "stages": opts.stages,
    }
    try:
        facts, decision = run_preflight(remote, opts, steps)
        problems = [*decision.problems, *filter(None, [world_problem(opts, len(facts.gpus))])]
        if problems:
            for p in problems:
                steps.say(f"REFUSED: {p}")
            return 2
        runtime = decision.runtime
        record.update(runtime=runtime, host_facts=asdict(facts))
        base = facts.base
        key = jobs.JobKey(
            commit=local.commit,
            profile=opts.profile,
            stages=opts.stages,
            runtime=runtime,
            **jobs.run_settings(opts),
        )
        return run_job(
            remote,
            opts,
            base,
            key,
            record,
            steps,
            lambda resume_dir: start_job(
                remote, opts, facts, runtime, local, key, resume_dir, steps, line=decision.cuda_line
            ),
        )
    finally:
        remote.close()


def fetch_main(opts: RemoteOptions, steps: Steps) -> int:
    """FETCH=<job-id>: bring back that job's run (following it first if it still runs), then
    report and archive it as `make remote` would have."""
    steps.begin("preflight", f"checking {opts.host.label} for job {opts.fetch_job}")
    remote = connect_for_transfers(opts)
    try:
        base = resolve_base(remote, opts.remote_dir)
        st = jobs.status(remote, base, log_offset=1 << 62, job_id=opts.fetch_job) if base else None
        if st is None or st.job is None:
            known = [j.job["job_id"] for j in jobs.every_job(remote, base) if j.job] if base else []
            steps.say(
                f"REFUSED: no job {opts.fetch_job} under {base or opts.remote_dir or 'cardtime'} on "
                f"{opts.host.label}; "
                f"jobs there: {', '.join(known) or 'none'}"
            )
            return 2
        record: dict[str, Any] = {
            "host": opts.host.label,
            "host_key": host_key_record(remote),
            "job": st.job,
            "commit": st.job.get("commit"),
            "profile": st.job.get("profile"),
            "stages": st.job.get("stages"),
            "runtime": st.job.get("runtime"),
            "reattached": True,
            "fetched_by_job_id": True,
        }
        remote, final, fetched = follow_and_fetch(remote, opts, base, opts.fetch_job, steps, record)
    finally:
        remote.close()
    return report_and_archive(opts, fetched.local_dir, record, final, steps)


def options(args):
    nodes = ()
    if args.command == "remote" and (args.hosts or args.hostfile):
        nodes = cluster_hosts(args.hosts, args.hostfile)
        if args.host:
            raise ClusterError(
                "HOST= and HOSTS=/HOSTFILE= both given: list every node, the first included, in HOSTS="
            )
        args.host = nodes[0].label
    kw = dict(
        host=parse_host(args.host),
        hosts=nodes,
        key=args.key or None,
        known_hosts=args.known_hosts or None,
        ssh_config=args.ssh_config or None,
        accept_new_host=truthy(args.accept_new_host),
        remote_dir=args.remote_dir,
    )
    if args.command in ("remote", "plan"):
        kw["nproc"] = nproc_arg(args.nproc)
    if args.command == "remote":
        check_run_settings(args)
        kw.update(
            profile=args.profile,
            stages=args.stages,
            tier=args.tier,
            burnin_min=args.burnin_min,
            runtime=args.runtime or None,
            image=args.image or None,
            cuda_line=args.cuda_line or None,
            archive=args.archive or None,
            endpoint_url=args.endpoint_url or None,
            allow_dirty=truthy(args.allow_dirty),
            new_run=truthy(args.new_run),
            detach=args.detach or None,
            runs_dir=args.runs_dir,
            fetch_exports=truthy(args.fetch_exports),
            fetch_job=args.fetch or None,
        )
        if nodes:
            kw["nodes_run"] = node_run_settings(args)
    return RemoteOptions(**kw)


def check_run_settings(args) -> None:
    """Every setting of `make remote` that is not about logging in, refused here on the laptop before the
    first connection: a typo must not cost the preflight's minutes, nor surface after an hour of billed
    stages."""
    if args.cuda_line:
        from suite.hardware.cuda_lines import line_named

        line_named(args.cuda_line)
    if args.burnin_min:
        from suite.env_settings import minutes

        minutes(args.burnin_min)
    master_port_arg(args.master_port)
    check_destination(args.archive, args.endpoint_url)


def nproc_arg(text: str) -> int:
    """NPROC=: '' → 0 (one process per GPU); a positive number, else the error naming it."""
    if text and not text.isdigit() or text == "0":
        raise ValueError(f"NPROC={text!r} is not a number of processes per node (e.g. NPROC=8)")
    return int(text or 0)


def node_run_settings(args):
    """HOSTS='s settings for every node, each checked here on the laptop before any node is reached."""
    return NodeRunSettings(
        ssh_config=args.node_ssh_config,
        socket_ifname=args.socket_ifname,
        nproc=nproc_arg(args.nproc),
        node_addrs=node_addrs_arg(args.node_addrs, args.hostfile),
        master_port=master_port_arg(args.master_port),
    )
