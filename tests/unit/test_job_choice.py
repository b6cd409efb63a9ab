"""What `make remote` does with the host's jobs (provisioning/job/jobchoice.py), on JobStatus values."""

from __future__ import annotations

from provisioning.job.jobchoice import choose
from provisioning.job.jobs import JobKey, JobStatus

KEY = JobKey(commit="a" * 40, profile="gloo-cpu", stages="", runtime="host")


def job(
    job_id: str,
    *,
    commit: str = "a" * 40,
    exit_code: int | None = None,
    alive: bool = False,
    fetched: bool = False,
    run_dir: str | None = "/r",
) -> JobStatus:
    return JobStatus(
        job={"job_id": job_id, **{**KEY.__dict__, "commit": commit}, "started_epoch": 0.0},
        pid=1,
        alive=alive,
        exit_code=exit_code,
        run_dir=run_dir,
        fetched=fetched,
        now=100.0,
    )


def test_a_finished_unfetched_run_of_other_settings_blocks_a_new_one():
    old = job("J1", commit="b" * 40, exit_code=0)
    assert [j.job["job_id"] for j in choose([old], KEY, new_run=False).waiting] == ["J1"]
    assert choose([old], KEY, new_run=False).action == "unfetched"
    assert choose([old], KEY, new_run=True).action == "start"
    # Found whatever came after it: a later fetched run and a later died one do not hide it.
    later = [old, job("J2", commit="c" * 40, exit_code=0, fetched=True), job("J3", commit="d" * 40)]
    assert choose(later, KEY, new_run=False).action == "unfetched"
    assert (
        choose([job("J1", commit="b" * 40, exit_code=0, fetched=True)], KEY, new_run=False).action == "start"
    )


def test_the_same_settings_reattach_and_another_running_job_is_busy():
    assert choose([job("J1", exit_code=1)], KEY, new_run=False).job.job["job_id"] == "J1"
    assert choose([job("J1", exit_code=1)], KEY, new_run=True).action == "start"
    running_other = job("J2", commit="b" * 40, alive=True)
    assert choose([job("J1", exit_code=0), running_other], KEY, new_run=True).action == "busy"
    assert choose([running_other, job("J3", alive=True)], KEY, new_run=False).job.job["job_id"] == "J3"
    died = choose([job("J1", commit="b" * 40, exit_code=0, fetched=True), job("J4")], KEY, new_run=False)
    assert died.action == "start" and died.job.job["job_id"] == "J4"  # resumed from its run directory


def test_a_job_that_ended_before_its_run_is_neither_reattached_nor_waiting():
    # Its set-up failed or the GPU check refused the runtime (exit 2, no run directory): a rerun
    # after the fix (CUDA_LINE=, another IMAGE=) must start afresh, not show the old refusal again.
    refused = job("J1", exit_code=2, run_dir=None)
    assert choose([refused], KEY, new_run=False).action == "start"
    assert choose([refused], KEY, new_run=False).job is None
    other = job("J0", commit="b" * 40, exit_code=2, run_dir=None)
    assert choose([other], KEY, new_run=False).action == "start"  # nothing of it waits to be fetched
    assert choose([other, job("J2", commit="c" * 40, exit_code=0)], KEY, new_run=False).action == "unfetched"


def test_another_nproc_or_tier_on_the_same_commit_is_another_job():
    """A rerun with NPROC= or TIER= (or BURNIN_MIN=) changed is another run: started, not re-attached to the
    first; the same settings still re-attach, and a job recorded before these fields existed is the unset
    one."""
    from provisioning.job.jobs import run_settings
    from provisioning.session.hosts import parse_host
    from provisioning.session.options import RemoteOptions

    def key_of(**kw):
        return JobKey(
            commit="a" * 40,
            profile="nccl-gpu",
            stages="",
            runtime="host",
            **run_settings(RemoteOptions(host=parse_host("root@203.0.113.7"), **kw)),
        )

    def recorded(key, **extra):
        return JobStatus(
            job={"job_id": "J1", **key.__dict__, **extra, "started_epoch": 0.0},
            pid=1,
            alive=True,
            exit_code=None,
            run_dir="/r",
            now=100.0,
        )

    first = key_of(nproc=4, tier="quick")
    assert (first.nproc, first.tier) == ("4", "quick")
    running = recorded(first)
    # the same
    assert choose([running], key_of(nproc=4, tier="quick"), new_run=False).job.job["job_id"] == "J1"
    for other in (
        key_of(nproc=2, tier="quick"),
        key_of(tier="quick"),
        key_of(nproc=4, tier="standard"),
        key_of(nproc=4),
        key_of(nproc=4, tier="quick", burnin_min="30"),
    ):
        assert choose([running], other, new_run=False).action == "busy", other  # never taken for the first
    before = {k: v for k, v in key_of().__dict__.items() if k not in ("nproc", "tier", "burnin_min")}
    old = JobStatus(job={"job_id": "J0", **before, "started_epoch": 0.0}, pid=1, alive=True, now=100.0)
    assert choose([old], key_of(), new_run=False).job.job["job_id"] == "J0"
    assert choose([old], key_of(nproc=2), new_run=False).action == "busy"
