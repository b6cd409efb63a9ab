"""`make remote HOST=user@host[:port]`: drive a rented host from the laptop, step by step.

    python -m provisioning remote --host root@203.0.113.7:2222 --profile nccl-gpu --archive s3://b/cardtime

 1 preflight  connect, report GPUs/driver/disk/docker/python; refuse with one line what is missing
 2 code       exactly the local HEAD: git clone of origin if the host reaches it, else a git bundle over SFTP
 3 runtime    RUNTIME=host: a venv keyed by pyproject.toml's hash; RUNTIME=docker: the image built or
              pulled on the host (remote_docker.py)
 4 run        detached (tmux or setsid+nohup); followed through progress.json and its log; a second
              `make remote` with the same commit/profile/stages re-attaches instead of starting another
 5 fetch      the run directory to runs/<run-id>/ (resumable, sizes and sha256 checked)
 6 report     rendered locally (python -m reports), before the archive so that the archive carries it
 7 archive    ARCHIVE=s3://bucket/prefix → prefix/<run-id>/ from the laptop (credentials stay here)

Exit status: the run's (0 all verdicts pass/warn/skip, 1 a fail verdict), 2 when a step could not be done.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from . import codesync, fetch, hostruntime, jobs, preflight, remote_docker
from .archive import ArchiveError, archive_run
from .connection import ConnectionLost, Remote, RemoteError, fingerprint
from .hosts import HostSpec

STEPS = ("preflight", "code", "runtime", "run", "fetch", "report", "archive")
RECORD_NAME = "remote.json"  # the laptop's record of how the run was driven, kept beside manifest.json
RECONNECT_WAITS_S = (2, 4, 8, 16, 30, 30)  # ~1.5 min of retries before giving the terminal back


@dataclass
class RemoteOptions:
    host: HostSpec
    profile: str = "nccl-gpu"
    stages: str = ""
    """Comma-separated stages ('' = all), validated locally against the suite's stage list."""
    runtime: str | None = None
    image: str | None = None
    key: str | None = None
    known_hosts: str | None = None
    accept_new_host: bool = False
    remote_dir: str = "cardtime"
    """On the host, relative to the login's home unless absolute."""
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
    remote = Remote.open(opts.host, key=opts.key, known_hosts=opts.known_hosts, accept_new_host=opts.accept_new_host)
    remote.connect()
    return remote


def host_key_record(remote: Remote) -> dict[str, Any]:
    key = remote.conn.client.get_transport().get_remote_server_key()
    first = [asdict(f) for f in remote.first_use]
    return {"name": remote.spec.known_hosts_name, "type": key.get_name(), "fingerprint": fingerprint(key),
            "accepted_on_first_use": bool(first), "known_hosts": str(remote.known_hosts)}


def run_preflight(remote: Remote, opts: RemoteOptions, steps: Steps) -> tuple[preflight.HostFacts, preflight.Decision]:
    r = remote.run(preflight.probe_command(opts.remote_dir), timeout=60, what="the preflight probe failed")
    facts = preflight.parse_probe(r.stdout)
    decision = preflight.decide(facts, runtime=opts.runtime, needs_gpu=needs_gpu(opts.profile), image=opts.image)
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


def follow(remote_ref: list[Remote], opts: RemoteOptions, base: str, steps: Steps) -> jobs.JobStatus:
    """Print the run's log and progress until it finishes; reconnect on a dropped connection."""
    offset = None  # first learn the log's size: on re-attach, show only its last few lines
    quiet_since = time.monotonic()
    last_heartbeat = 0.0
    failures = 0
    while True:
        try:
            if offset is None:
                offset = max(0, jobs.status(remote_ref[0], base, log_offset=1 << 62).log_size - 4000)
            st = jobs.status(remote_ref[0], base, log_offset=offset)
            failures = 0
        except ConnectionLost as e:
            if failures >= len(RECONNECT_WAITS_S):
                raise ConnectionLost(opts.host.label, "connection lost while following the run; it goes on on the host",
                                     hint=f"rerun `make remote HOST={opts.host.label} …` with the same settings to re-attach, "
                                     f"or `make remote-status HOST={opts.host.label}`") from e
            wait = RECONNECT_WAITS_S[failures]
            failures += 1
            steps.say(f"connection lost ({e.what}); reconnecting in {wait} s ({failures}/{len(RECONNECT_WAITS_S)})")
            time.sleep(wait)
            remote_ref[0].close()
            try:
                remote_ref[0] = connect(opts)
            except RemoteError:
                pass
            continue
        if st.log:
            offset = st.log_offset
            for line in st.log.splitlines():
                steps.say(f"  │ {line}")
            quiet_since = time.monotonic()
        now = time.monotonic()
        if st.state in ("running", "starting") and now - quiet_since > 20 and now - last_heartbeat > 20:
            last_heartbeat = now
            steps.say(f"  {jobs.describe_progress(st.progress)}")
        if st.state == "finished":
            return st
        if st.state == "died":
            raise RemoteError(opts.host.label, f"the run stopped without an exit code: {st.describe()}",
                              output=st.log, hint="rerun the same `make remote`: it resumes the run after its last complete stage")
        if st.log_offset < st.log_size:
            continue  # more log waiting: read it now
        time.sleep(opts.follow_interval_s)


def start_job(remote: Remote, opts: RemoteOptions, facts: preflight.HostFacts, runtime: str,
              local: codesync.LocalCheckout, key: jobs.JobKey, resume_dir: str | None, steps: Steps) -> dict[str, Any]:
    base = facts.base
    steps.begin("code", f"code at {local.commit[:12]} ({local.branch})")
    code_dir, how = codesync.ship(remote, local, base, say=steps.say)
    steps.say(f"{code_dir}: {'already there' if how == 'reused' else 'shipped by ' + how}")

    job_id = jobs.new_job_id(key)
    job_dir = f"{base}/jobs/{job_id}"
    args = suite_args(opts, base, f"{job_dir}/LAST", resume_dir)
    env = {"PYTHONUNBUFFERED": "1"}
    steps.begin("runtime", f"RUNTIME={runtime}")
    if runtime == "docker":
        image = remote_docker.ensure_image(remote, local, opts.image, say=steps.say)
        remote.run(["mkdir", "-p", "--", f"{base}/runs", job_dir])
        argv = remote_docker.run_argv(image, job_id=job_id, job_dir=job_dir, runs_dir=f"{base}/runs", suite_args=args,
                                      gpus=needs_gpu(opts.profile))
    else:
        python = hostruntime.ensure_venv(
            remote, hostruntime.venv_dir(base, hostruntime.pyproject_key(local.root, local.commit), facts.python),
            code_dir, say=steps.say)
        argv = [python, "-m", "suite", *args]
        # The checkout first on the path for the runner and every torchrun worker it starts.
        env["PYTHONPATH"] = code_dir

    steps.begin("run", f"starting {opts.profile} {opts.stages or 'all stages'} detached")
    use_tmux = facts.tmux if opts.detach is None else opts.detach == "tmux"
    jobs.start(remote, base, key, code_dir, argv, use_tmux=use_tmux, job_id=job_id,
               env=env, extra={"code_shipped_by": how, "resumes": resume_dir, "host_key": host_key_record(remote)})
    st = jobs.wait_started(remote, base)
    how_to_watch = f"tmux -L {jobs.TMUX_SOCKET} attach -t cardtime-{job_id}" if use_tmux else "setsid"
    steps.say(f"job {job_id} started (pid {st.pid}, {how_to_watch}); closing the laptop now loses nothing")
    return st.job or {"job_id": job_id, "code_dir": code_dir, "code_shipped_by": how}


def remote_main(opts: RemoteOptions, stream=None) -> int:
    steps = Steps(stream)
    opts.runs_dir = Path(opts.runs_dir).resolve()  # printed paths are absolute: they are clicked on
    opts.stages = validate_stages(opts.stages)
    needs_gpu(opts.profile)  # an unknown profile fails here, before any SSH
    local = codesync.local_checkout(opts.repo, allow_dirty=opts.allow_dirty)

    steps.begin("preflight", f"checking {opts.host.label}")
    remote = connect(opts)
    remote.sftp()  # a proxied endpoint without SFTP is refused here, before anything is shipped
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
        current = jobs.status(remote, base)
        same = current.job is not None and key.matches(current.job)
        if same and current.state in ("running", "starting") or same and current.state == "finished" and not opts.new_run:
            steps.begin("run", f"re-attaching: {current.describe()}")
            record["job"] = current.job
            record["reattached"] = True
        elif current.state in ("running", "starting"):
            steps.say(f"REFUSED: the host is busy: {current.describe()}")
            steps.say(f"  re-attach with that run's settings (PROFILE={current.job['profile']} "
                      f"STAGES={current.job['stages']} at commit {current.job['commit'][:12]}), watch it with "
                      f"`make remote-status HOST={opts.host.label}`, or stop it on the host: kill -TERM -- -{current.pid}")
            return 2
        else:
            resume_dir = current.run_dir if same and current.state == "died" and current.run_dir else None
            if resume_dir:
                steps.say(f"the last run of these settings died; resuming {resume_dir} after its last complete stage")
            record["job"] = start_job(remote, opts, facts, runtime, local, key, resume_dir, steps)
            record["reattached"] = False

        steps.begin("run", "following the run (Ctrl-C or a dropped connection leaves it running)")
        ref = [remote]
        final = follow(ref, opts, base, steps)
        remote = ref[0]
        steps.say(final.describe())
        if not final.run_dir:
            raise RemoteError(opts.host.label, "the run ended without a run directory", exit_code=final.exit_code,
                              output=final.log or "", hint=f"read {final.job_dir}/log on the host")

        steps.begin("fetch", f"{final.run_dir} → {opts.runs_dir}/")
        fetched = fetch.fetch_run(remote, final.run_dir, opts.runs_dir, say=steps.say, exports=opts.fetch_exports)
        record.update(remote_run_dir=final.run_dir, run_exit_code=final.exit_code,
                      fetched=datetime.now(timezone.utc).isoformat(timespec="seconds"),
                      files=len(fetched.files))
    finally:
        remote.close()
    local_dir = fetched.local_dir
    write_record(local_dir / RECORD_NAME, record)
    (opts.runs_dir / "LAST").write_text(str(local_dir) + "\n")

    steps.begin("report", f"python -m reports {local_dir}")
    report_ok = render_report(local_dir, steps)

    steps.begin("archive", opts.archive or "ARCHIVE unset: the run stays in the local folder only")
    if opts.archive:
        try:
            archive_run(local_dir, opts.archive, endpoint_url=opts.endpoint_url, say=steps.say)
        except ArchiveError as e:
            steps.say(f"ARCHIVE FAILED: {e}")
            return 2
    steps.say(f"run directory: {local_dir}")
    if report_ok:
        steps.say(f"report: {local_dir / 'report.html'}")
    code = final.exit_code if final.exit_code in (0, 1) else 2
    return code if report_ok else max(code, 2)


def write_record(path: Path, record: dict[str, Any]) -> None:
    """remote.json. A re-attach to a run already fetched leaves the first record as it is (its
    fetch time, the host's facts then), so an unchanged run keeps an unchanged file that the
    archive skips."""
    try:
        old = json.loads(path.read_text())
    except (OSError, ValueError):
        old = {}
    same_job = old.get("job", {}).get("job_id") == record.get("job", {}).get("job_id")
    if same_job and old.get("run_exit_code") == record.get("run_exit_code") and old.get("fetched"):
        return
    path.write_text(json.dumps(record, indent=1, default=str) + "\n")


def render_report(run_dir: Path, steps: Steps) -> bool:
    r = subprocess.run([sys.executable, "-m", "reports", str(run_dir)], capture_output=True, text=True)
    for line in (r.stdout + r.stderr).strip().splitlines()[-5:]:
        steps.say(f"  │ {line}")
    if r.returncode != 0:
        steps.say(f"report FAILED (exit {r.returncode}): rerun `make report RUN={run_dir}` after fixing the above")
    return r.returncode == 0


def status_main(opts: RemoteOptions, stream=None) -> int:
    """`make remote-status HOST=…`: the host's latest job, its stage and the last lines of its log."""
    out = stream or sys.stdout
    remote = connect(opts)
    try:
        base = remote.run(["sh", "-c", 'cd -- "$1" 2>/dev/null && pwd -P', "sh", opts.remote_dir], check=False).stdout.strip()
        if not base:
            print(f"{opts.host.label}: no {opts.remote_dir} folder: nothing was run here", file=out)
            return 1
        st = jobs.status(remote, base, log_offset=1 << 62)
        if st.job is not None:
            st_tail = jobs.status(remote, base, log_offset=max(0, st.log_size - 2000))
            st.log = st_tail.log
    finally:
        remote.close()
    print(f"{opts.host.label}: {st.describe()}", file=out)
    if st.job is not None:
        print(f"  job folder {st.job_dir} (log: {st.job_dir}/log)", file=out)
        for line in st.log.splitlines()[-10:]:
            print(f"  │ {line}", file=out)
    return 0 if st.state in ("running", "starting", "finished") else 1


def gpu_model(nvidia_smi_l_line: str) -> str:
    """'GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-…)' → 'NVIDIA H100 80GB HBM3'."""
    text = nvidia_smi_l_line.split(":", 1)[1] if ":" in nvidia_smi_l_line else nvidia_smi_l_line
    return text.split(" (UUID")[0].strip()


def plan_main(opts: RemoteOptions, profile_name: str, rate: float | None, stream=None) -> int:
    """`make plan HOST=…`: the plan for the GPU count and model the host reports."""
    from suite.config import get_profile
    from suite.plan import PlanAssumptions, estimate, render

    out = stream or sys.stdout
    remote = connect(opts)
    try:
        r = remote.run(["nvidia-smi", "-L"], check=False, timeout=60)
    finally:
        remote.close()
    gpus = [l.strip() for l in r.stdout.splitlines() if l.strip().startswith("GPU ")]
    if r.exit_code != 0 or not gpus:
        print(f"{opts.host.label}: no GPU listed by nvidia-smi -L ({last_line(r.stdout + r.stderr)}): "
              "plan without HOST= (make plan GPUS=8) or fix the driver", file=out)
        return 2
    model = gpu_model(gpus[0])
    print(f"{opts.host.label}: {len(gpus)} × {model}", file=out)
    try:
        plan = estimate(get_profile(profile_name, len(gpus)), PlanAssumptions(gpu_name=model), rate_per_hour=rate)
    except ValueError as e:
        print(f"{e}; or plan for an H100 box with `make plan GPUS={len(gpus)}`", file=out)
        return 2
    print(render(plan), file=out)
    return 0


def last_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[-1] if lines else "no output"
