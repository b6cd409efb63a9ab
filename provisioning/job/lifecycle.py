"""One job's life as make remote drives it (one host or several): its `python -m suite` arguments; re-attach,
refuse or start; then follow it to its end, fetch its run, report and archive it."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from provisioning.job import fetch, jobchoice, jobs
from provisioning.job.finish import report_and_archive
from provisioning.job.follow import follow
from provisioning.session.connection import Remote, RemoteError
from provisioning.session.login import connect
from provisioning.session.options import RemoteOptions
from provisioning.session.shell import given_flags
from provisioning.session.steps import Steps
from suite import world


def suite_args(
    opts: RemoteOptions, base: str, last_file: str, resume_dir: str | None, gpus: int = 0
) -> list[str]:
    """The arguments of `python -m suite` for this run (the image's entry point takes the same); `gpus`: what
    preflight counted per node, which with NPROC= gives the run's processes (suite/world.py, as make plan
    HOST=)."""
    if resume_dir:  # the manifest's profile, its nproc included
        return ["run", "--resume", resume_dir, "--record-last", last_file]
    args = [
        "run",
        "--profile",
        opts.profile,
        "--out",
        f"{base}/runs",
        "--record-last",
        last_file,
        *world.nproc_args(opts.profile, gpus, opts.nproc),
    ]
    return args + given_flags(
        [("--stages", opts.stages), ("--tier", opts.tier), ("--burnin-min", opts.burnin_min)]
    )


def refuse_choice(choice: jobchoice.Choice, opts: RemoteOptions, steps: Steps) -> int:
    """The host is busy, or holds finished runs nobody fetched: say which and what to do; exit 2."""
    label = opts.host.label
    if choice.action == "busy":
        busy = choice.job
        steps.say(f"REFUSED: the host is busy: {busy.describe()}")
        steps.say(
            f"  re-attach with that run's settings (PROFILE={busy.job['profile']} "
            f"STAGES={busy.job['stages']} at commit {busy.job['commit'][:12]}), watch it with "
            f"`make remote-status HOST={label}`, or stop it on the host: kill -TERM -- -{busy.pid}"
        )
        return 2
    steps.say(f"REFUSED: {len(choice.waiting)} finished run(s) on the host were never fetched:")
    for j in choice.waiting:
        steps.say(f"  {j.describe()}")
    steps.say(
        f"  fetch one with `make remote HOST={label} FETCH={choice.waiting[-1].job['job_id']}`, "
        "or start another anyway with NEW_RUN=1"
    )
    return 2


def run_job(
    remote: Remote,
    opts: RemoteOptions,
    base: str,
    key: jobs.JobKey,
    record: dict[str, Any],
    steps: Steps,
    start,
) -> int:
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
            steps.say(
                f"the last run of these settings died; resuming {resume_dir} after its last complete stage"
            )
        record.update(job=start(resume_dir), reattached=False)
    try:
        remote, final, fetched = follow_and_fetch(remote, opts, base, record["job"]["job_id"], steps, record)
    finally:
        remote.close()  # the connection follow_and_fetch ended with (a reconnect replaces the caller's)
    return report_and_archive(opts, fetched.local_dir, record, final, steps)


def follow_and_fetch(
    remote: Remote, opts: RemoteOptions, base: str, job_id: str, steps: Steps, record: dict[str, Any]
) -> tuple[Remote, jobs.JobStatus, fetch.FetchReport]:
    """Follow the job to its end, fetch its run, mark it fetched on the host and note it in `record`."""
    steps.begin("run", "following the run (Ctrl-C or a dropped connection leaves it running)")
    ref = [remote]
    final = follow(ref, lambda: connect(opts), base, job_id, steps.say, opts.follow_interval_s)
    remote = ref[0]
    steps.say(final.describe())
    if final.refused:  # the GPU check after set-up: its one line, the run never started
        raise RemoteError(
            opts.host.label,
            final.refused,
            exit_code=final.exit_code,
            hint="fix the above, then rerun the same make remote: it starts afresh",
        )
    if not final.run_dir:
        raise RemoteError(
            opts.host.label,
            "the run ended without a run directory",
            exit_code=final.exit_code,
            output=final.log or "",
            hint=f"read {final.job_dir}/log on the host",
        )
    steps.begin("fetch", f"{final.run_dir} → {opts.runs_dir}/")
    fetched = fetch.fetch_run(remote, final.run_dir, opts.runs_dir, say=steps.say, exports=opts.fetch_exports)
    jobs.mark_fetched(remote, final.job_dir)
    record.update(
        remote_run_dir=final.run_dir,
        run_exit_code=final.exit_code,
        fetched=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        files=len(fetched.files),
        left_on_host=[f.path for f in fetched.left_on_host],
    )
    return remote, final, fetched
