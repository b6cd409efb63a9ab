"""The detached run on the host: started under tmux (when present) or setsid+nohup, so that a
dropped SSH connection or a closed laptop loses nothing, and found again by the next `make remote`.

On the host, under the remote directory <base>:

    jobs/current              the id of the latest job
    jobs/<job-id>/job.json    what was started: commit, profile, stages, runtime, command
    jobs/<job-id>/job.sh      the script the detacher runs (written over SFTP, every value quoted)
    jobs/<job-id>/setup.sh    what it runs first: the venv install or the image build (detached too)
    jobs/<job-id>/pid         the job shell's pid, written first thing
    jobs/<job-id>/log         everything the suite prints
    jobs/<job-id>/LAST        the run directory (python -m suite run --record-last)
    jobs/<job-id>/refused     the GPU check's one line, when it refused the runtime (cuda_check.py)
    jobs/<job-id>/exit        the suite's exit code, written last (0 all passed, 1 a fail verdict)
    runs/<run-id>/            the run directory itself

`status()` reads all of it in one round trip (a small Python program on the host) and returns a
JobStatus; `state` is starting | running | finished | died.
"""

from __future__ import annotations

import json
import posixpath
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from provisioning.session.connection import Remote, RemoteError
from provisioning.session.shell import HOST_PYTHON, join, quote

# argv: base, log offset (bytes)[, job id: '' the latest, '*' every job (without logs)].
# Prints one JSON object (a list for '*'). Runs on the host's python3 (any 3.x).
# The functions shared by the host-side programs (this one and hostlock.LOCK_PROGRAM): argv[1] is base.
HOST_FUNCTIONS = r"""
import json, os, sys, time
base = sys.argv[1]
jobs = os.path.join(base, "jobs")
def read(path):
    try:
        with open(path) as f:
            return f.read().strip()
    except (OSError, UnicodeDecodeError):
        return None
def describe(jid, with_log, offset=0):
    out = {"job": None}
    d = os.path.join(jobs, jid)
    try:
        out["job"] = json.loads(read(os.path.join(d, "job.json")) or "null")
    except ValueError:
        out["job"] = None
    try:  # when job.json was written, by the host's clock (the laptop's may be off by minutes)
        out["written_epoch"] = os.stat(os.path.join(d, "job.json")).st_mtime
    except OSError:
        out["written_epoch"] = None
    pid = read(os.path.join(d, "pid"))
    alive = False
    if pid and pid.isdigit():
        try:
            os.kill(int(pid), 0)
            alive = True
            cmdline = read("/proc/%s/cmdline" % pid)
            if cmdline is not None and "job.sh" not in cmdline:
                alive = False  # the pid was reused by an unrelated process
        except PermissionError:
            alive = True
        except OSError:
            alive = False
    code = read(os.path.join(d, "exit"))
    out.update(job_dir=d, pid=int(pid) if pid and pid.isdigit() else None, alive=alive,
               exit_code=int(code) if code and code.lstrip("-").isdigit() else None,
               run_dir=read(os.path.join(d, "LAST")), fetched=os.path.exists(os.path.join(d, "fetched")),
               refused=read(os.path.join(d, "refused")))
    progress = None
    if out["run_dir"] and with_log:
        try:
            progress = json.loads(read(os.path.join(out["run_dir"], "progress.json")) or "null")
        except ValueError:
            progress = None
    out["progress"] = progress
    log = os.path.join(d, "log")
    try:
        size = os.path.getsize(log)
        chunk = b""
        if with_log:
            with open(log, "rb") as f:
                f.seek(min(offset, size))
                chunk = f.read(65536)
        out["log"] = chunk.decode("utf-8", "replace")
        out["log_offset"] = min(offset, size) + len(chunk)
        out["log_size"] = size
    except OSError:
        out.update(log="", log_offset=offset, log_size=0)
    out["now"] = time.time()
    return out
"""
STATUS_PROGRAM = (
    HOST_FUNCTIONS
    + r"""
offset = int(sys.argv[2])
wanted = sys.argv[3] if len(sys.argv) > 3 else ""
if wanted == "*":
    names = sorted(os.listdir(jobs)) if os.path.isdir(jobs) else []
    print(json.dumps([describe(n, False) for n in names if os.path.isfile(os.path.join(jobs, n, "job.json"))]))
else:
    jid = wanted or read(os.path.join(jobs, "current"))
    print(json.dumps(describe(jid, True, offset) if jid else {"job": None, "now": time.time()}))
"""  # noqa: E501
)

TMUX_SOCKET = "cardtime"
POLL_TIMEOUT_S = 30.0  # a status read takes well under a second; longer means the link is gone
LOCK_HEARTBEAT_S = 300.0
"""How often a multi-node job freshens its lock on the other nodes, where no pid of its own can show it alive
(hostlock.LOCK_STALE_S, six beats, is when a silent one is taken as dead)."""
STARTING_GRACE_S = 60.0  # a job whose pid file has not appeared this long after its start has died


@dataclass(frozen=True)
class JobKey:
    """What makes two `make remote` calls the same run: re-attach instead of starting another."""

    commit: str
    profile: str
    stages: str
    """Comma-separated stage selection; '' for all."""
    runtime: str
    nodes: str = ""
    """HOSTS=: the nodes of a multi-node run, comma-separated ('' on one host; a job recorded before had
    none)."""
    nproc: str = ""
    """NPROC= as asked ('' unset: one process per GPU listed). Another NPROC= is another world, another
    run."""
    tier: str = ""
    """TIER= ('' none): quick and standard select other stages and another burn-in length."""
    burnin_min: str = ""
    """BURNIN_MIN= ('' the tier's): another burn-in length is another run."""
    nccl_env: str = ""
    """NCCL_ENV=: the digest of its settings ('' none): other NCCL settings are another run."""

    def matches(self, job: dict[str, Any]) -> bool:
        """Every setting equal; a job recorded before a field existed has it '' (the unset value)."""
        return all(str(job.get(k, "")) == v for k, v in self.__dict__.items())


def run_settings(opts) -> dict[str, str]:
    """JobKey's nproc, tier, burnin_min and nccl_env from a RemoteOptions (provisioning/session/options.py),
    as asked."""
    from suite import run_env

    settings = opts.nccl_env
    return {
        "nproc": str(opts.nproc) if opts.nproc else "",
        "tier": opts.tier or "",
        "burnin_min": str(opts.burnin_min or ""),
        "nccl_env": run_env.digest(settings) if settings else "",
    }


@dataclass
class JobStatus:
    job: dict[str, Any] | None
    job_dir: str | None = None
    pid: int | None = None
    alive: bool = False
    exit_code: int | None = None
    run_dir: str | None = None
    progress: dict[str, Any] | None = None
    log: str = ""
    log_offset: int = 0
    log_size: int = 0
    fetched: bool = False
    """The laptop fetched this job's run (it writes jobs/<id>/fetched when it has)."""
    refused: str | None = None
    """The GPU check's one line when it refused the runtime after set-up (the job then exits 2, no run)."""
    now: float = field(default_factory=time.time)
    written_epoch: float | None = None
    """When the host wrote job.json, by the host's clock (`now` is the host's too); None from an older
    status."""

    @property
    def started_on_host(self) -> float:
        """The job's start by the host's clock: compared with the host's `now`, never with the laptop's."""
        if self.written_epoch is not None:
            return self.written_epoch
        return float((self.job or {}).get("started_epoch", 0))

    @property
    def state(self) -> str:
        if self.job is None:
            return "none"
        if self.exit_code is not None:
            return "finished"
        if self.alive:
            return "running"
        if self.pid is None and self.now - self.started_on_host < STARTING_GRACE_S:
            return "starting"
        return "died"

    @property
    def waits_for_fetch(self) -> bool:
        """Finished with a run directory that the laptop has not fetched yet."""
        return self.state == "finished" and bool(self.run_dir) and not self.fetched

    def describe(self) -> str:
        """One line: which job, where it is."""
        if self.job is None:
            return "no cardtime job on this host"
        j = self.job
        head = (
            f"job {j['job_id']} (commit {j['commit'][:12]}, {j['profile']}, "
            f"{j['stages'] or 'all stages'}, RUNTIME={j['runtime']})"
        )
        if self.state == "finished" and self.refused:
            return f"{head}: REFUSED before the run: {self.refused}"
        if self.state == "finished":
            return f"{head}: finished, exit {self.exit_code}; run directory {self.run_dir}"
        if self.state == "died":
            return (
                f"{head}: DIED without an exit code (host rebooted or killed?); run directory "
                f"{self.run_dir or '—'}"
            )
        return f"{head}: {self.state}; {describe_progress(self.progress)}"


def describe_progress(p: dict[str, Any] | None) -> str:
    if not p:
        return "no progress yet"
    text = f"stage {p.get('index')}/{p.get('total')} {p.get('stage')} ({p.get('stage_elapsed_s', 0):.0f} s)"
    if p.get("message"):
        text += f": {p['message']}"
    if p.get("done") is not None and p.get("of"):
        text += f" [{p['done']}/{p['of']}]"
    return text


def job_status(data: dict[str, Any]) -> JobStatus:
    return JobStatus(**{k: v for k, v in data.items() if k in JobStatus.__dataclass_fields__})


def status(remote: Remote, base: str, log_offset: int = 0, job_id: str | None = None) -> JobStatus:
    """One job (the latest when job_id is None) with its log from log_offset on."""
    r = remote.run(
        [*HOST_PYTHON, "-c", STATUS_PROGRAM, base, str(log_offset), job_id or ""],
        timeout=POLL_TIMEOUT_S,
        what="cannot read the job's status",
    )
    return job_status(json.loads(r.stdout.strip().splitlines()[-1]))


def every_job(remote: Remote, base: str) -> list[JobStatus]:
    """Every job on the host, oldest first (ids start with their UTC start time), without logs."""
    r = remote.run(
        [*HOST_PYTHON, "-c", STATUS_PROGRAM, base, "0", "*"],
        timeout=POLL_TIMEOUT_S,
        what="cannot list the host's jobs",
    )
    return [job_status(d) for d in json.loads(r.stdout.strip().splitlines()[-1])]


def mark_fetched(remote: Remote, job_dir: str) -> None:
    """Recorded on the host once the run is safely on the laptop: no longer "finished, unfetched"."""
    remote.write_text(f"{job_dir}/fetched", datetime.now(timezone.utc).isoformat(timespec="seconds") + "\n")


def new_job_id(key: JobKey, when: datetime | None = None) -> str:
    when = when or datetime.now(timezone.utc)
    return f"{when:%Y%m%dT%H%M%SZ}-{key.commit[:12]}-{key.profile}"


def release_lock_argv(jobs_dir: str, job_id: str) -> list[str]:
    """Remove the host's run lock (<base>/jobs/lock, provisioning/job/hostlock.py) if, and only if, job_id
    holds it."""
    return [
        "sh",
        "-c",
        '[ "$(cat "$1/job_id" 2>/dev/null)" = "$2" ] && rm -rf -- "$1"; true',
        "sh",
        f"{jobs_dir}/lock",
        job_id,
    ]


def touch_lock_argv(jobs_dir: str, job_id: str) -> list[str]:
    """Freshen the host's run lock's age if, and only if, job_id holds it (-c: a lock given back meanwhile is
    not made again as a file)."""
    return [
        "sh",
        "-c",
        '[ "$(cat "$1/job_id" 2>/dev/null)" = "$2" ] && touch -c -- "$1"; true',
        "sh",
        f"{jobs_dir}/lock",
        job_id,
    ]


def heartbeat_lines(command: str, every_s: float) -> str:
    """POSIX lines starting `command` in the background every `every_s` seconds for as long as the job's own
    shell lives (`kill -0 $$`: a job killed outright stops its heartbeat at the next beat); `$beat` names
    it."""
    return (
        "  ( trap 'kill $s 2>/dev/null; exit 0' TERM\n"
        f"    while kill -0 $$ 2>/dev/null; do {command}; sleep {every_s:g} & s=$!; wait $s; done\n"
        "  ) > /dev/null 2>&1 < /dev/null &\n"
        "  beat=$!\n"
    )


def job_script(
    job_dir: str,
    code_dir: str,
    argv: list[str],
    env: dict[str, str],
    setup: bool = False,
    teardown: str = "",
    heartbeat: str = "",
    heartbeat_s: float = 300.0,
) -> str:
    """The POSIX script the detacher runs: pid first; then the set-up (`setup.sh`: the venv install
    or the image build, which survive the laptop like the run does); the suite's output to `log`,
    `teardown` (POSIX lines: the other nodes' locks given back), its exit code (2 when the set-up failed),
    then the host's run lock given back (when this job holds it). `heartbeat`: a command run every
    `heartbeat_s` while the set-up and the run go on (the other nodes' locks kept fresh), stopped after."""
    q = quote
    jobs_dir, job_id = posixpath.split(job_dir.rstrip("/"))
    exports = "".join(f"export {name}={q(value)}\n" for name, value in env.items())
    if setup:
        run = (
            f'  echo "── set-up ($(date -u +%H:%M:%SZ))"\n'
            f"  if sh {q(job_dir + '/setup.sh')}; then\n"
            f'    echo "── set-up done ($(date -u +%H:%M:%SZ)); the run starts"\n'
            f"    {join(argv)}\n"
            "    code=$?\n"
            "  else\n"
            '    echo "cardtime set-up FAILED (exit $?): see the lines above; rerun the same make remote to '
            'retry it"\n'
            "    code=2\n"
            "  fi\n"
        )
    else:
        run = f"  {join(argv)}\n  code=$?\n"
    return (
        "#!/bin/sh\n"
        "# A cardtime run, started detached by `make remote`; `make remote-status` shows where it is.\n"
        f"echo $$ > {q(job_dir + '/pid')}\n"
        f"{exports}"
        "{\n"
        f"  cd {q(code_dir)} || {{ echo 2 > {q(job_dir + '/exit')}; exit 2; }}\n"
        f'  echo "cardtime job started $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname)"\n'
        f"{heartbeat_lines(heartbeat, heartbeat_s) if heartbeat else ''}"
        f"{run}"
        f"{'  kill $beat 2>/dev/null' + chr(10) if heartbeat else ''}"
        f"{teardown}"
        f"  echo $code > {q(job_dir + '/exit.tmp')} && mv -f {q(job_dir + '/exit.tmp')} "
        f"{q(job_dir + '/exit')}\n"
        f"}} >> {q(job_dir + '/log')} 2>&1 < /dev/null\n"
        f"{join(release_lock_argv(jobs_dir, job_id))}\n"
    )


def detach_command(job_dir: str, job_id: str, use_tmux: bool) -> list[str] | str:
    """tmux when present (a person can attach to it); otherwise setsid+nohup, fully detached from the
    session."""
    script = job_dir + "/job.sh"
    if use_tmux:
        # Its own server socket (-L cardtime): never mixed with the user's tmux sessions on the host.
        return ["tmux", "-L", TMUX_SOCKET, "new-session", "-d", "-s", "cardtime-" + job_id, "sh", script]
    # setsid: a new session, so the sshd channel's SIGHUP never reaches it; every stream off the channel.
    return f"setsid nohup sh {quote(script)} > /dev/null 2>&1 < /dev/null &"


def start(
    remote: Remote,
    base: str,
    key: JobKey,
    code_dir: str,
    argv: list[str],
    *,
    use_tmux: bool,
    env: dict[str, str] | None = None,
    extra: dict[str, Any] | None = None,
    job_id: str | None = None,
    setup: str = "",
    teardown: str = "",
    heartbeat: str = "",
) -> str:
    """Write the job's files and start it detached; returns the job id. `setup`: a POSIX script the job runs
    before argv (idempotent: a re-run after a reboot finds its work done); `teardown`: POSIX lines it runs
    after argv has ended, before giving the host's lock back; `heartbeat`: a command it runs every
    hostlock.LOCK_HEARTBEAT_S meanwhile."""
    job_id = job_id or new_job_id(key)
    job_dir = f"{base}/jobs/{job_id}"
    remote.run(["mkdir", "-p", "--", job_dir], what="cannot create the job folder")
    record = {
        **key.__dict__,
        "job_id": job_id,
        "code_dir": code_dir,
        "argv": argv,
        "detach": "tmux" if use_tmux else "setsid",
        "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "started_epoch": time.time(),
        **(extra or {}),
    }
    remote.write_text(f"{job_dir}/job.json", json.dumps(record, indent=1) + "\n")
    if setup:
        remote.write_text(f"{job_dir}/setup.sh", setup, mode=0o755)
    remote.write_text(
        f"{job_dir}/job.sh",
        job_script(
            job_dir,
            code_dir,
            argv,
            env or {},
            setup=bool(setup),
            teardown=teardown,
            heartbeat=heartbeat,
            heartbeat_s=LOCK_HEARTBEAT_S,
        ),
        mode=0o755,
    )
    remote.write_text(f"{base}/jobs/current.tmp", job_id + "\n")
    remote.run(["mv", "-f", "--", f"{base}/jobs/current.tmp", f"{base}/jobs/current"])
    remote.run(detach_command(job_dir, job_id, use_tmux), what="cannot start the detached run")
    return job_id


def wait_started(remote: Remote, base: str, job_id: str, timeout_s: float = 30.0) -> JobStatus:
    deadline = time.monotonic() + timeout_s
    while True:
        st = status(remote, base, job_id=job_id)
        if st.pid is not None or st.exit_code is not None:
            return st
        if time.monotonic() > deadline:
            raise RemoteError(
                remote.label,
                f"the detached run did not start within {timeout_s:.0f} s",
                command=f"{st.job_dir}/job.sh",
                hint=f"look at {st.job_dir}/log on the host",
            )
        time.sleep(0.5)
