"""A job's start is judged by the host's clock (provisioning/job/jobs.py): the laptop's may be minutes off."""

from __future__ import annotations

import json
import os
import subprocess
import time

from provisioning.job import jobs


def status_of(base) -> jobs.JobStatus:
    out = subprocess.run(
        ["python3", "-c", jobs.STATUS_PROGRAM, str(base), "0"], capture_output=True, text=True, check=True
    ).stdout
    return jobs.JobStatus(**json.loads(out))


def test_a_laptop_a_minute_ahead_does_not_keep_a_dead_job_starting(tmp_path):
    """job.json written (the laptop a minute ahead: started_epoch in the host's future), the job never
    started: once the grace has passed by the host's clock it is `died`, not `starting` — the host program run
    for real."""
    job = tmp_path / "jobs" / "J1"
    job.mkdir(parents=True)
    ahead = time.time() + 60.0
    (tmp_path / "jobs" / "current").write_text("J1\n")
    (job / "job.json").write_text(json.dumps({"job_id": "J1", "started_epoch": ahead}))
    written = time.time() - jobs.STARTING_GRACE_S - 5
    os.utime(job / "job.json", (written, written))  # as if written by the host that long ago
    st = status_of(tmp_path)
    assert abs(st.written_epoch - written) < 1e-3 and st.pid is None
    assert st.state == "died"
    # the old comparison (host's now − laptop's start) would still call it starting
    assert st.now - st.job["started_epoch"] < jobs.STARTING_GRACE_S


def test_a_fresh_job_is_starting_and_an_old_status_falls_back():
    st = jobs.JobStatus(job={"started_epoch": 0.0}, now=1000.0, written_epoch=990.0)
    assert st.state == "starting"
    assert jobs.JobStatus(job={"started_epoch": 990.0}, now=1000.0).state == "starting"
    assert jobs.JobStatus(job={"started_epoch": 900.0}, now=1000.0).state == "died"
