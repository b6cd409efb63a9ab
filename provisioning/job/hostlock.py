"""One run at a time on a host, whoever starts it: `<base>/jobs/lock`, made by an atomic mkdir.

Two laptops (two people, or one person in two terminals) may both find the host idle and both
start a run on the same GPUs; the lock lets one through. It is taken before anything is shipped,
names the job about to start, and is released by that job's own script when the job ends (or by
the laptop when the start fails). A lock is broken only when it is provably stale: its job has
finished, its job's process is gone, or its job never started within LOCK_STALE_S (a laptop that
died while starting) — on a multi-node run's other nodes: its job's heartbeat stopped that long ago.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from provisioning.job.jobs import HOST_FUNCTIONS, POLL_TIMEOUT_S, release_lock_argv
from provisioning.session.connection import Remote, RemoteError
from provisioning.session.shell import HOST_PYTHON

LOCK_STALE_S = 30 * 60.0
"""A holder whose job never wrote its pid this long after taking the lock died while starting
(shipping the code and the build context; the set-up itself runs inside the job). On the other nodes of a
multi-node run, whose job (and pid) lives on the first node, the job freshens the lock's age every
jobs.LOCK_HEARTBEAT_S while it runs: there, this long without a beat means the first node's job is gone."""

# argv: base, holder JSON (with job_id), stale seconds. Prints {"acquired": bool, "holder": {...}, "age_s":
# s}.
LOCK_PROGRAM = (
    HOST_FUNCTIONS
    + r"""
import shutil
holder, stale_s = json.loads(sys.argv[2]), float(sys.argv[3])
lock = os.path.join(jobs, "lock")
os.makedirs(jobs, exist_ok=True)
for attempt in (1, 2):
    try:
        os.mkdir(lock)
    except FileExistsError:
        try:
            other = json.loads(read(os.path.join(lock, "holder.json")) or "{}")
            age = time.time() - os.stat(lock).st_mtime
        except (OSError, ValueError):
            other, age = {}, 0.0
        if other.get("job_id") == holder["job_id"]:  # this job's already: a node on the first node's storage
            print(json.dumps({"acquired": True, "holder": other, "age_s": age}))
            break
        job = describe(other["job_id"], False) if other.get("job_id") else None
        ended = job is not None and (job["exit_code"] is not None or job["pid"] is not None and not job["alive"])
        if ended or not other and age > 60 or age > stale_s and (job is None or job["pid"] is None):
            shutil.rmtree(lock, ignore_errors=True)
            continue
        print(json.dumps({"acquired": False, "holder": other, "age_s": age}))
        break
    holder["since_epoch"] = time.time()
    with open(os.path.join(lock, "holder.json.tmp"), "w") as f:
        json.dump(holder, f)
    os.replace(os.path.join(lock, "holder.json.tmp"), os.path.join(lock, "holder.json"))
    with open(os.path.join(lock, "job_id"), "w") as f:
        f.write(holder["job_id"] + "\n")
    print(json.dumps({"acquired": True, "holder": holder, "age_s": 0.0}))
    break
else:
    print(json.dumps({"acquired": False, "holder": {}, "age_s": 0.0}))
"""  # noqa: E501
)


class HostBusy(RemoteError):
    """Another run holds the host."""


@dataclass
class Lock:
    base: str
    job_id: str

    @property
    def path(self) -> str:
        return f"{self.base}/jobs/lock"


def acquire(remote: Remote, base: str, job_id: str, holder: dict[str, Any], role: str = "host") -> Lock:
    """Take the host's lock for `job_id`, or raise HostBusy naming who holds it (role "node": the host is a
    node of a multi-node run, and named so)."""
    r = remote.run(
        [*HOST_PYTHON, "-c", LOCK_PROGRAM, base, json.dumps({**holder, "job_id": job_id}), str(LOCK_STALE_S)],
        timeout=POLL_TIMEOUT_S,
        what="cannot take the host's run lock",
    )
    answer = json.loads(r.stdout.strip().splitlines()[-1])
    if not answer["acquired"]:
        raise busy(remote.label, answer, base, role)
    return Lock(base, job_id)


def busy(label: str, answer: dict[str, Any], base: str, role: str = "host") -> HostBusy:
    """LOCK_PROGRAM's answer when another job holds the lock of `label` (a host, or a node of a multi-node
    run)."""
    other = answer["holder"]
    return HostBusy(
        f"node {label}" if role == "node" else label,
        f"the {role} is busy: {other.get('by', 'another laptop')} is starting or running "
        f"job {other.get('job_id', '?')} ({answer['age_s'] / 60:.0f} min ago)",
        hint=f"wait for it (`make remote-status HOST={label}`); if that start was abandoned, "
        f"remove the lock on the host: rm -rf {base}/jobs/lock",
    )


def release(remote: Remote, lock: Lock) -> None:
    """Give the lock back (a start that failed); only when it is still this job's."""
    remote.run(release_lock_argv(f"{lock.base}/jobs", lock.job_id), check=False)
