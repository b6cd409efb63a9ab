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
import sys
import time
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from . import codesync, cuda_check, fetch, hostlock, hostruntime, jobchoice, jobs, preflight, remote_docker
from .suite_container import host_user
from .connection import Remote, RemoteError, fingerprint
from .finish import report_and_archive
from .follow import follow
from .hosts import HostSpec

STEPS = ("preflight", "code", "runtime", "run", "fetch", "report", "archive")


@dataclass
class RemoteOptions:
    host: HostSpec
    hosts: tuple[HostSpec, ...] = ()
    """HOSTS=/HOSTFILE=: the nodes of a multi-node run, host being the first (provisioning/cluster_run.py)."""
    nodes_run: Any = None
    """cluster_run.NodeRunSettings: how the first node reaches and runs the others (None: the defaults)."""
    profile: str = "nccl-gpu"
    stages: str = ""
    """Comma-separated stages ('' = all), validated locally against the suite's stage list."""
    runtime: str | None = None
    image: str | None = None
    cuda_line: str | None = None
    """cu130 | cu126 (suite/cuda_lines.py); None: the newest line the host's driver runs."""
    key: str | None = None
    known_hosts: str | None = None
    ssh_config: str | None = None
    """An ssh_config file instead of ~/.ssh/config (HOST is resolved by `ssh -G` either way)."""
    accept_new_host: bool = False
    remote_dir: str = ""
    """On the host, relative to the login's home unless absolute; '' = a mounted persistent volume's
    cardtime/ (/workspace on pods), else ~/cardtime (preflight.REMOTE_DIR_RULE)."""
    archive: str | None = None
    endpoint_url: str | None = None
    allow_dirty: bool = False
    new_run: bool = False
    """Start a new run even when the host's latest job has the same commit/profile/stages and finished."""
    runs_dir: Path = Path("runs")
    repo: Path = Path(".")
    follow_interval_s: float = 2.0
    detach: str | None = None
    """tmux | setsid; None: tmux when the host has it."""
    fetch_job: str | None = None
    """FETCH=<job-id>: fetch (report, archive) that job's run instead of starting or re-attaching."""
    fetch_exports: bool = False
    """Fetch the regenerable exports too (nsys SQLite beside its report); by default they stay on the host."""


class Steps:
    """Prints which step runs and how long the whole command has taken: `[4/7 run +01:32] …`."""

    def __init__(self, stream=None):
        self.stream = stream or sys.stderr
        self.start = time.monotonic()
        self.current = "preflight"

    def begin(self, name: str, what: str) -> None:
        self.current = name
        self.say(f"── {what}")

    def say(self, text: str) -> None:
        n = STEPS.index(self.current) + 1
        elapsed = int(time.monotonic() - self.start)
        head = f"[{n}/{len(STEPS)} {self.current:<9} +{elapsed // 60:02d}:{elapsed % 60:02d}]"
        for line in str(text).splitlines() or [""]:
            self.stream.write(f"{head} {line}\n")
        self.stream.flush()


def connect(opts: RemoteOptions) -> Remote:
    remote = Remote.open(opts.host, key=opts.key, known_hosts=opts.known_hosts, accept_new_host=opts.accept_new_host,
                         ssh_config=opts.ssh_config)
    remote.connect()
    return remote


def connect_for_transfers(opts: RemoteOptions) -> Remote:
    """A connection that can ship and fetch: an endpoint without SFTP (a proxied relay) is refused
    here, before anything is shipped or run."""
    remote = connect(opts)
    try:
        remote.sftp()
    except RemoteError:
        remote.close()
        raise
    return remote


def host_key_record(remote: Remote) -> dict[str, Any]:
    key = remote.conn.client.get_transport().get_remote_server_key()
    first = [asdict(f) for f in remote.first_use]
    record = {"name": remote.target.known_hosts_name, "type": key.get_name(), "fingerprint": fingerprint(key),
              "accepted_on_first_use": bool(first), "known_hosts": str(remote.known_hosts)}
    if remote.hops:  # the ProxyJump gateways, each checked against known_hosts like the box
        record["via"] = [{"name": h.target.known_hosts_name,
                          "fingerprint": fingerprint(h.conn.client.get_transport().get_remote_server_key())}
                         for h in remote.hops]
    return record


def run_preflight(remote: Remote, opts: RemoteOptions, steps: Steps) -> tuple[preflight.HostFacts, preflight.Decision]:
    r = remote.run(preflight.probe_command(opts.remote_dir), timeout=60, what="the preflight probe failed")
    facts = preflight.parse_probe(r.stdout)
    decision = preflight.decide(facts, runtime=opts.runtime, needs_gpu=needs_gpu(opts.profile), image=opts.image,
                                cuda_line=opts.cuda_line)
    for line in facts.summary():
        steps.say(line)
    for note in decision.notes:
        steps.say(f"note: {note}")
    return facts, decision


def needs_gpu(profile_name: str) -> bool:
    from suite.config import get_profile

    return get_profile(profile_name).device == "cuda"


def validate_stages(spec: str) -> str:
    """The stage list in run order, or a usage error naming the stages there are (checked before any SSH)."""
    if not spec:
        return ""
    from suite import stages

    return ",".join(stages.select(spec))


def suite_args(opts: RemoteOptions, base: str, last_file: str, resume_dir: str | None) -> list[str]:
    """The arguments of `python -m suite` for this run (the image's entry point takes the same)."""
    if resume_dir:
        return ["run", "--resume", resume_dir, "--record-last", last_file]
    args = ["run", "--profile", opts.profile, "--out", f"{base}/runs", "--record-last", last_file]
    if opts.stages:
        args += ["--stages", opts.stages]
    return args


def start_job(remote: Remote, opts: RemoteOptions, facts: preflight.HostFacts, runtime: str,
              local: codesync.LocalCheckout, key: jobs.JobKey, resume_dir: str | None, steps: Steps,
              line=None) -> dict[str, Any]:
    """Take the host's run lock, ship the code, prepare the runtime and start the job detached;
    the job gives the lock back when it ends (the laptop does, if the start fails). `line`: the
    CUDA line preflight chose (None: a CPU profile, or IMAGE=)."""
    base = facts.base
    job_id = jobs.new_job_id(key)
    lock = hostlock.acquire(remote, base, job_id, {"by": f"{getpass.getuser()}@{socket.gethostname()}",
                                                   "commit": key.commit, "profile": key.profile})
    started = False
    try:
        # Under the lock, look once more: another laptop may have started (or finished) a run
        # between our first look and the lock.
        again = jobchoice.choose(jobs.every_job(remote, base), key, opts.new_run)
        if again.action != "start":
            raise hostlock.HostBusy(remote.label, "another run was started on the host a moment ago",
                                    hint="rerun the same make remote: it re-attaches or says what holds the host")
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
        args = suite_args(opts, base, f"{job_dir}/LAST", resume_dir)
        env = {"PYTHONUNBUFFERED": "1"}
        # The runtime's set-up (image build, venv install) runs inside the detached job: minutes
        # to an hour that a sleeping laptop or a dropped link must not cut off.
        steps.begin("runtime", f"RUNTIME={runtime}")
        user = host_user(facts.uid, facts.gid)
        if runtime == "docker":
            image, setup = remote_docker.image_setup(remote, local, opts.image, base, say=steps.say, line=line)
            remote.run(["mkdir", "-p", "--", f"{base}/runs", job_dir])
            argv = remote_docker.run_argv(image, job_id=job_id, job_dir=job_dir, runs_dir=f"{base}/runs",
                                          suite_args=args, gpus=gpu, user=user, rdma=bool(facts.rdma_devices))
            check = cuda_check.image_argv(image, job_id, gpus_seen=len(facts.gpus), driver=facts.driver, user=user)
        else:
            venv_line = line if gpu else None  # a CPU profile keeps pip's own torch
            venv = hostruntime.venv_dir(base, hostruntime.pyproject_key(local.root, local.commit), facts.python,
                                        venv_line)
            setup = hostruntime.setup_script(venv, code_dir, python=facts.python_exe or "python3", line=venv_line)
            steps.say(f"the job installs the venv {venv} first unless it is ready (first time on this host: minutes)")
            argv = [f"{venv}/bin/python", "-m", "suite", *args]
            check = cuda_check.host_python_argv(f"{venv}/bin/python", gpus_seen=len(facts.gpus), driver=facts.driver)
            env.update(preflight.host_job_environment(facts))
            # The checkout first on the path for the runner and every torchrun worker it starts.
            env["PYTHONPATH"] = code_dir
            env["CARDTIME_COMMIT"] = local.commit  # the manifest's commit where the code has no .git
        if gpu:  # torch in the runtime must see every GPU before the stages spend their timeouts
            setup += cuda_check.job_step(check, job_dir)
            steps.say("then it checks that torch there sees every GPU, before any stage")

        steps.begin("run", f"starting {opts.profile} {opts.stages or 'all stages'} detached")
        use_tmux = facts.tmux if opts.detach is None else opts.detach == "tmux"
        jobs.start(remote, base, key, code_dir, argv, use_tmux=use_tmux, job_id=job_id,
                   env=env, setup=setup,
                   extra={"code_shipped_by": how, "resumes": resume_dir, "host_key": host_key_record(remote)})
        started = True
    finally:
        if not started:
            hostlock.release(remote, lock)
    st = jobs.wait_started(remote, base, job_id)
    how_to_watch = f"tmux -L {jobs.TMUX_SOCKET} attach -t cardtime-{job_id}" if use_tmux else "setsid"
    steps.say(f"job {job_id} started (pid {st.pid}, {how_to_watch}); closing the laptop now loses nothing")
    return st.job or {"job_id": job_id, "code_dir": code_dir, "code_shipped_by": how}


def refuse_choice(choice: jobchoice.Choice, opts: RemoteOptions, steps: Steps) -> int:
    """The host is busy, or holds finished runs nobody fetched: say which and what to do; exit 2."""
    label = opts.host.label
    if choice.action == "busy":
        busy = choice.job
        steps.say(f"REFUSED: the host is busy: {busy.describe()}")
        steps.say(f"  re-attach with that run's settings (PROFILE={busy.job['profile']} "
                  f"STAGES={busy.job['stages']} at commit {busy.job['commit'][:12]}), watch it with "
                  f"`make remote-status HOST={label}`, or stop it on the host: kill -TERM -- -{busy.pid}")
        return 2
    steps.say(f"REFUSED: {len(choice.waiting)} finished run(s) on the host were never fetched:")
    for j in choice.waiting:
        steps.say(f"  {j.describe()}")
    steps.say(f"  fetch one with `make remote HOST={label} FETCH={choice.waiting[-1].job['job_id']}`, "
              "or start another anyway with NEW_RUN=1")
    return 2


def remote_main(opts: RemoteOptions, stream=None) -> int:
    steps = Steps(stream)
    opts.runs_dir = Path(opts.runs_dir).resolve()  # printed paths are absolute: they are clicked on
    if opts.fetch_job:
        return fetch_main(opts, steps)
    opts.stages = validate_stages(opts.stages)
    needs_gpu(opts.profile)  # an unknown profile fails here, before any SSH
    if len(opts.hosts) > 1:
        from .cluster_run import cluster_main

        return cluster_main(opts, steps)
    local = codesync.local_checkout(opts.repo, allow_dirty=opts.allow_dirty)

    steps.begin("preflight", f"checking {opts.host.label}")
    remote = connect_for_transfers(opts)
    record: dict[str, Any] = {"host": opts.host.label, "host_key": host_key_record(remote),
                              "commit": local.commit, "branch": local.branch, "dirty": local.dirty,
                              "profile": opts.profile, "stages": opts.stages}
    try:
        facts, decision = run_preflight(remote, opts, steps)
        if decision.problems:
            for p in decision.problems:
                steps.say(f"REFUSED: {p}")
            return 2
        runtime = decision.runtime
        record.update(runtime=runtime, host_facts=asdict(facts))
        base = facts.base
        key = jobs.JobKey(commit=local.commit, profile=opts.profile, stages=opts.stages, runtime=runtime)
        return run_job(remote, opts, base, key, record, steps, lambda resume_dir: start_job(
            remote, opts, facts, runtime, local, key, resume_dir, steps, line=decision.cuda_line))
    finally:
        remote.close()


def run_job(remote: Remote, opts: RemoteOptions, base: str, key: jobs.JobKey, record: dict[str, Any], steps: Steps,
            start) -> int:
    """Re-attach to the job of these settings, refuse (busy, or finished runs unfetched), or start one
    (`start(resume_dir)` → its job record; resume_dir: a died run of these settings, else None); then follow,
    fetch, report and archive it. The exit status of `make remote`."""
    choice = jobchoice.choose(jobs.every_job(remote, base), key, opts.new_run)
    if choice.action == "reattach":
        steps.begin("run", f"re-attaching: {choice.job.describe()}")
        record.update(job=choice.job.job, reattached=True)
    elif choice.action in ("busy", "unfetched"):
        return refuse_choice(choice, opts, steps)
    else:
        resume_dir = choice.job.run_dir if choice.job is not None else None
        if resume_dir:
            steps.say(f"the last run of these settings died; resuming {resume_dir} after its last complete stage")
        record.update(job=start(resume_dir), reattached=False)
    try:
        remote, final, fetched = follow_and_fetch(remote, opts, base, record["job"]["job_id"], steps, record)
    finally:
        remote.close()  # the connection follow_and_fetch ended with (a reconnect replaces the caller's)
    return report_and_archive(opts, fetched.local_dir, record, final, steps)


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
            steps.say(f"REFUSED: no job {opts.fetch_job} under {base or opts.remote_dir or 'cardtime'} on {opts.host.label}; "
                      f"jobs there: {', '.join(known) or 'none'}")
            return 2
        record: dict[str, Any] = {"host": opts.host.label, "host_key": host_key_record(remote), "job": st.job,
                                  "commit": st.job.get("commit"), "profile": st.job.get("profile"),
                                  "stages": st.job.get("stages"), "runtime": st.job.get("runtime"),
                                  "reattached": True, "fetched_by_job_id": True}
        remote, final, fetched = follow_and_fetch(remote, opts, base, opts.fetch_job, steps, record)
    finally:
        remote.close()
    return report_and_archive(opts, fetched.local_dir, record, final, steps)


def resolve_base(remote: Remote, remote_dir: str) -> str:
    """The remote folder's absolute path on the host ('' when it does not exist); REMOTE_DIR='' by
    preflight's rule (a mounted persistent volume's cardtime/, else ~/cardtime), as `make remote` chose it."""
    return remote.run(preflight.resolve_dir_command(remote_dir), check=False).stdout.strip()


def follow_and_fetch(remote: Remote, opts: RemoteOptions, base: str, job_id: str, steps: Steps,
                     record: dict[str, Any]) -> tuple[Remote, jobs.JobStatus, fetch.FetchReport]:
    """Follow the job to its end, fetch its run, mark it fetched on the host and note it in `record`."""
    steps.begin("run", "following the run (Ctrl-C or a dropped connection leaves it running)")
    ref = [remote]
    final = follow(ref, lambda: connect(opts), base, job_id, steps.say, opts.follow_interval_s)
    remote = ref[0]
    steps.say(final.describe())
    if final.refused:  # the GPU check after set-up: its one line, the run never started
        raise RemoteError(opts.host.label, final.refused, exit_code=final.exit_code,
                          hint="fix the above, then rerun the same make remote: it starts afresh")
    if not final.run_dir:
        raise RemoteError(opts.host.label, "the run ended without a run directory", exit_code=final.exit_code,
                          output=final.log or "", hint=f"read {final.job_dir}/log on the host")
    steps.begin("fetch", f"{final.run_dir} → {opts.runs_dir}/")
    fetched = fetch.fetch_run(remote, final.run_dir, opts.runs_dir, say=steps.say, exports=opts.fetch_exports)
    jobs.mark_fetched(remote, final.job_dir)
    record.update(remote_run_dir=final.run_dir, run_exit_code=final.exit_code,
                  fetched=datetime.now(timezone.utc).isoformat(timespec="seconds"), files=len(fetched.files),
                  left_on_host=[f.path for f in fetched.left_on_host])
    return remote, final, fetched
