"""Follow one detached job by its id until it ends: its log and progress, printed; reconnecting
after a dropped connection (a status poll that times out counts as one)."""

from __future__ import annotations

import time
from typing import Callable, TypeVar

from provisioning.job import jobs
from provisioning.session.connection import ConnectionLost, Remote, RemoteError

RECONNECT_WAITS_S = (2, 4, 8, 16, 30, 30)  # ~1.5 min of retries before giving the terminal back
T = TypeVar("T")


def call_reconnecting(
    remote_ref: list[Remote],
    reconnect: Callable[[], Remote],
    call: Callable[[Remote], T],
    say,
    given_up: Callable[[ConnectionLost], ConnectionLost],
) -> T:
    """call(remote_ref[0]), retried on a fresh connection after a dropped one (RECONNECT_WAITS_S between
    tries); remote_ref[0] is replaced on reconnect; given_up(the last loss) is raised once the waits are
    spent."""
    for failures in range(len(RECONNECT_WAITS_S) + 1):
        try:
            return call(remote_ref[0])
        except ConnectionLost as e:
            if failures == len(RECONNECT_WAITS_S):
                raise given_up(e) from e
            wait = RECONNECT_WAITS_S[failures]
            say(
                f"connection lost ({e.what}); reconnecting in {wait} s "
                f"({failures + 1}/{len(RECONNECT_WAITS_S)})"
            )
            time.sleep(wait)
            remote_ref[0].close()
            try:
                remote_ref[0] = reconnect()
            except RemoteError:
                pass
    raise AssertionError("unreachable")


def follow(
    remote_ref: list[Remote],
    reconnect: Callable[[], Remote],
    base: str,
    job_id: str,
    say,
    interval_s: float = 2.0,
) -> jobs.JobStatus:
    """Print job_id's log and progress until it finishes; remote_ref[0] is replaced on reconnect.
    By id, never `jobs/current`: another laptop's later job must not be taken for this one."""
    label = remote_ref[0].label
    offset = None  # first learn the log's size: on re-attach, show only its last few lines
    quiet_since = time.monotonic()
    last_heartbeat = 0.0

    def read(remote: Remote) -> jobs.JobStatus:
        nonlocal offset
        if offset is None:
            offset = max(0, jobs.status(remote, base, log_offset=1 << 62, job_id=job_id).log_size - 4000)
        return jobs.status(remote, base, log_offset=offset, job_id=job_id)

    def given_up(e: ConnectionLost) -> ConnectionLost:
        return ConnectionLost(
            label,
            "connection lost while following the run; it goes on on the host",
            hint=f"rerun `make remote HOST={label} …` with the same settings to re-attach, "
            f"or `make remote-status HOST={label}`",
        )

    while True:
        st = call_reconnecting(remote_ref, reconnect, read, say, given_up)
        if st.job is None:
            raise RemoteError(
                label, f"job {job_id} is not on the host (its folder {base}/jobs/{job_id} is gone)"
            )
        if st.log:
            offset = st.log_offset
            for line in st.log.splitlines():
                say(f"  │ {line}")
            quiet_since = time.monotonic()
        now = time.monotonic()
        if st.state in ("running", "starting") and now - quiet_since > 20 and now - last_heartbeat > 20:
            last_heartbeat = now
            say(f"  {jobs.describe_progress(st.progress)}")
        if st.state == "finished":
            return st
        if st.state == "died":
            raise RemoteError(
                label,
                f"the run stopped without an exit code: {st.describe()}",
                output=st.log,
                hint="rerun the same `make remote`: it resumes the run after its last complete stage",
            )
        if st.log_offset < st.log_size:
            continue  # more log waiting: read it now
        time.sleep(interval_s)
