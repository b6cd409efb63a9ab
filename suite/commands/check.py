"""python -m suite check RUN_DIR [--fail-on warn|fail] [--json]: a run's verdicts, and an exit status for a pipeline.

    python -m suite check runs/20261129T1630Z-box-nccl-gpu --fail-on warn && echo accepted

Exit status: 0 when no verdict reaches the --fail-on level (default fail), 1 when one does, 2 when
RUN_DIR cannot be read: no manifest, or any of its records (manifest, verdicts, results, expectations)
damaged, truncated or of another schema — a run whose measurements cannot be read is never judged.
A stage that did not complete without leaving a verdict (the run was interrupted) counts as a
failure: an unfinished run is never accepted.
"""

from __future__ import annotations

import json
from pathlib import Path

from suite.run_consistency import consistency_problems

from ..results import RunDir, RunDirError, Verdict, status_counts
from . import usage_error
from ..verdicts import SEVERITY_RANK, summary_line

# What each --fail-on level rejects.
REJECTS = {"fail": ("fail",), "warn": ("fail", "warn")}
ORDER = SEVERITY_RANK  # failures first, as on the report's board


def add_parser(sub) -> None:
    p = sub.add_parser("check", help="print a run's verdicts; exit 1 when one reaches --fail-on (for pipelines)")
    p.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="the run directory")
    p.add_argument("--fail-on", choices=sorted(REJECTS), default="fail",
                   help="exit 1 on a verdict of this status or worse (default fail; warn rejects warnings too)")
    p.add_argument("--json", action="store_true",
                   help="print {run, fail_on, counts, unfinished, verdicts, rejected} as JSON instead of a table")
    p.set_defaults(func=main)


def unfinished_stages(run: RunDir, verdicts: list[Verdict]) -> list[str]:
    """Selected stages that neither completed nor left a verdict: an interrupted run's missing work."""
    judged = {v.stage for v in verdicts}
    stages = run.manifest.get("stages") or {}
    return [name for name in run.manifest.get("stages_selected") or stages
            if (stages.get(name) or {}).get("status") != "complete" and name not in judged]


def load_checked(path: Path) -> tuple[RunDir, list[Verdict]]:
    """The run and its verdicts, every record read: verdicts over rows that cannot be read judge nothing (exit 2)."""
    run = RunDir.load(path)
    verdicts = run.verdicts()
    frame = run.rows_frame()
    run.expectations()
    problems = consistency_problems(run, frame, verdicts)
    if problems:  # records that disagree: the run is damaged, not judged
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise RunDirError(run.path / problems[0].split(":")[0], problems[0].split(": ", 1)[1] + more)
    return run, verdicts


def main(args) -> int:
    try:
        run, verdicts = load_checked(args.run_dir)
    except (FileNotFoundError, RunDirError) as e:
        return usage_error(str(e))
    verdicts = sorted(verdicts, key=lambda v: (ORDER[v.status], v.id))
    counts = status_counts(verdicts)
    unfinished = unfinished_stages(run, verdicts)
    rejected = [v.id for v in verdicts if v.status in REJECTS[args.fail_on]] + [f"{s} (did not run)" for s in unfinished]
    if args.json:
        print(json.dumps({"run": str(run.path), "fail_on": args.fail_on, "counts": counts, "unfinished": unfinished,
                          "verdicts": [v.to_dict() for v in verdicts], "rejected": rejected}, indent=2))
    else:
        print_table(run, verdicts, unfinished, counts, args.fail_on, rejected)
    return 1 if rejected else 0


def print_table(run: RunDir, verdicts: list[Verdict], unfinished: list[str], counts: dict[str, int], fail_on: str,
                rejected: list[str]) -> None:
    width = max([len(v.id) for v in verdicts] + [7])
    print(f"{'status':<6}  {'verdict':<{width}}  observed (expected) — reason")
    for v in verdicts:
        reason = next((line for line in v.reason.splitlines() if line.strip()), "")
        print(f"{v.status.upper():<6}  {v.id:<{width}}  {v.observed} ({v.expected}) — {reason}")
    for stage in unfinished:
        print(f"{'NORUN':<6}  {stage:<{width}}  stage did not complete — resume: python -m suite run --resume {run.path}")
    print(summary_line(counts) + (f", {len(unfinished)} did not run" if unfinished else ""))
    verdict = "REJECTED" if rejected else "ACCEPTED"
    print(f"{verdict} (--fail-on {fail_on})" + (f": {', '.join(rejected)}" if rejected else ""))
