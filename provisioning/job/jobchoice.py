"""What `make remote` does with the jobs already on the host: re-attach, refuse, or start.

Every job is looked at, not only the latest: a run that finished and was never fetched is found
whatever was started after it, and a new run is refused while one waits (NEW_RUN=1 starts one
anyway; FETCH=<job-id> brings a waiting one back).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from provisioning.job.jobs import JobKey, JobStatus

ACTIVE = ("running", "starting")


@dataclass
class Choice:
    action: str
    """reattach | busy | unfetched | start"""
    job: JobStatus | None = None
    """reattach: the job to follow; busy: the one running; start: a died job of these settings to resume."""
    waiting: list[JobStatus] = field(default_factory=list)
    """unfetched: the finished runs never fetched."""


def choose(every: list[JobStatus], key: JobKey, new_run: bool) -> Choice:
    # A job that finished without a run directory (its set-up failed, or the GPU check refused the
    # runtime) holds nothing to fetch or re-attach to: the next `make remote` starts afresh.
    every = [j for j in every if not (j.state == "finished" and not j.run_dir)]
    same = [j for j in every if j.job is not None and key.matches(j.job)]
    latest_same = same[-1] if same else None
    active = [j for j in every if j.state in ACTIVE]
    if latest_same is not None and latest_same.state in ACTIVE:
        return Choice("reattach", latest_same)
    if active:
        return Choice("busy", active[-1])
    if latest_same is not None and latest_same.state == "finished" and not new_run:
        return Choice("reattach", latest_same)
    waiting = [j for j in every if j.waits_for_fetch and j is not latest_same]
    if waiting and not new_run:
        return Choice("unfetched", waiting=waiting)
    died = (
        latest_same
        if latest_same is not None and latest_same.state == "died" and latest_same.run_dir
        else None
    )
    return Choice("start", died)
