"""After a run is fetched (make remote, one host or several): the laptop's record of how it was driven
(remote.json beside manifest.json), the report rendered locally, the archive, and `make remote`'s exit
status."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from provisioning.job import jobs
from provisioning.job.archive import ArchiveError, archive_run
from suite.library.index import add_run, default_path

RECORD_NAME = "remote.json"  # the laptop's record of how the run was driven, kept beside manifest.json


def report_and_archive(opts, local_dir: Path, record: dict[str, Any], final: jobs.JobStatus, steps) -> int:
    write_record(local_dir / RECORD_NAME, record)
    (opts.runs_dir / "LAST").write_text(str(local_dir) + "\n")

    labels = {"price_per_hour": getattr(opts, "rate", None)}
    steps.say(add_run(local_dir, origin="fetched", library=default_path(opts.runs_dir), labels=labels))
    steps.begin("report", f"python -m reports {local_dir}")
    report_ok = render_report(local_dir, steps)

    steps.begin("archive", opts.archive or "ARCHIVE unset: the run stays in the local folder only")
    if opts.archive:
        try:
            archive_run(local_dir, opts.archive, endpoint_url=opts.endpoint_url, say=steps.say)
        except ArchiveError as e:
            steps.say(
                f"ARCHIVE FAILED: {e}; the run stays in {local_dir}: `python -m provisioning archive "
                f"{local_dir} {opts.archive}` uploads it later"
            )
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


def render_report(run_dir: Path, steps) -> bool:
    r = subprocess.run([sys.executable, "-m", "reports", str(run_dir)], capture_output=True, text=True)
    for line in (r.stdout + r.stderr).strip().splitlines()[-5:]:
        steps.say(f"  │ {line}")
    if r.returncode != 0:
        steps.say(
            f"report FAILED (exit {r.returncode}): rerun `make report RUN={run_dir}` after fixing the above"
        )
    return r.returncode == 0
