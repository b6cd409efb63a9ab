"""make slurm SLURM_HOST=…: the login node's venv installed by a detached job under the host's run lock.

Made in the SSH session's foreground, an install cut off by a dropped laptop left an orphan pip that could
still write the venv's ready mark after a rerun had removed the venv and started again. Here the install is a
job of its own (jobs.start, detached with setsid: hostruntime.ENSURE_VENV as its set-up), started under the
host's lock (hostlock: the job gives it back when it ends), and followed line by line. A rerun while it still
runs finds it (its job.json names the venv) and follows it instead of starting another; one that died is
redone, as an unfinished venv always is.
"""

from __future__ import annotations

import getpass
import socket
import time
from typing import Callable

from provisioning.job import hostlock, jobs
from provisioning.session.connection import Remote, RemoteError

POLL_S = 2.0


def ready(remote: Remote, venv: str) -> bool:
    return remote.run(["test", "-f", f"{venv}/.cardtime-ready"], check=False).exit_code == 0


def running_install(remote: Remote, base: str, venv: str) -> str | None:
    """The id of a job installing `venv` that still runs (or is starting), or None."""
    for st in reversed(jobs.every_job(remote, base)):
        if st.job and st.job.get("venv") == venv and st.state in ("running", "starting"):
            return st.job["job_id"]
    return None


def start_install(remote: Remote, base: str, venv: str, script: str, code_dir: str, commit: str) -> str:
    key = jobs.JobKey(commit=commit, profile="venv", stages="", runtime="slurm-venv")
    job_id = "venv-" + jobs.new_job_id(key)
    hostlock.acquire(
        remote,
        base,
        job_id,
        {"by": f"{getpass.getuser()}@{socket.gethostname()}", "what": f"the venv {venv}"},
    )
    jobs.start(
        remote,
        base,
        key,
        code_dir,
        ["true"],
        use_tmux=False,
        setup=script,
        job_id=job_id,
        extra={"venv": venv},
    )
    return job_id


def follow_install(
    remote: Remote,
    base: str,
    job_id: str,
    say: Callable[[str], None],
    poll_s: float = POLL_S,
    timeout_s: float = 3600.0,
) -> None:
    """Its log's new lines said as they come, until it ends; RemoteError when it failed or died."""
    offset, deadline = 0, time.monotonic() + timeout_s
    while True:
        st = jobs.status(remote, base, offset, job_id)
        for line in st.log.splitlines():
            say(line)
        offset = st.log_offset
        if st.state == "finished":
            if st.exit_code == 0:
                return
            raise RemoteError(
                remote.label,
                f"the venv install (job {job_id}) failed with exit {st.exit_code}",
                hint="fix the above (pip's output), then rerun the same make slurm: it is redone",
            )
        if st.state == "died" or time.monotonic() > deadline:
            raise RemoteError(
                remote.label,
                f"the venv install (job {job_id}) {st.state} without an exit code",
                hint=f"read {st.job_dir}/log on the login node; a rerun redoes the install",
            )
        time.sleep(poll_s)


def install_detached(
    remote: Remote,
    base: str,
    venv: str,
    script: str,
    code_dir: str,
    commit: str,
    say: Callable[[str], None],
    poll_s: float = POLL_S,
) -> None:
    """The venv ready: reused, or an earlier install followed, or a new one started detached and followed."""
    if ready(remote, venv):
        say(f"venv {venv} reused")
        return
    job_id = running_install(remote, base, venv)
    if job_id:
        say(f"an install of {venv} started before still runs (job {job_id}): following it")
    elif ready(remote, venv):  # an earlier install ended between the two looks
        say(f"venv {venv} reused")
        return
    else:
        job_id = start_install(remote, base, venv, script, code_dir, commit)
        say(f"installing {venv} in job {job_id}, detached: a dropped laptop loses nothing")
    follow_install(remote, base, job_id, say, poll_s)
