"""python -m suite check RUN_DIR [--fail-on warn|fail] [--json]: a run's verdicts and one verdict for the box.

    python -m suite check runs/20261129T1630Z-box-nccl-gpu --fail-on warn && echo accepted

The box verdict (suite/box_verdict.py) is the last line and the exit status:
0 ACCEPT (every check the profile plans ran, none at the --fail-on level) — or REHEARSAL, a CPU run whose
stages all ended, with no fail; 1 REJECT (a verdict at --fail-on, default fail); 3 INCONCLUSIVE (nothing
rejected, but a planned check skipped, a stage did not run to its end — a rehearsal's too — or an ingested
run's captures lack a stage: each listed);
2 when RUN_DIR cannot be read: no manifest, or any of its records (manifest, verdicts, results, expectations)
damaged, truncated or of another schema — a run whose measurements cannot be read is never judged.
"""

from __future__ import annotations

from pathlib import Path

from suite import next_steps, run_schema, strict_json
from suite.box_verdict import REJECTS, BoxVerdict, box_verdict, unfinished
from suite.commands import usage_error
from suite.results import RunDir, RunDirError, Verdict, status_counts
from suite.run_consistency import load_checked
from suite.verdicts import SEVERITY_RANK, summary_line

ORDER = SEVERITY_RANK  # failures first, as on the report's board


def add_parser(sub) -> None:
    p = sub.add_parser(
        "check", help="print a run's verdicts and the box's: exit 0 ACCEPT, 1 REJECT, 3 INCONCLUSIVE"
    )
    p.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="the run directory")
    p.add_argument(
        "--fail-on",
        choices=sorted(REJECTS),
        default="fail",
        help="reject on a verdict of this status or worse (default fail; warn rejects warnings too)",
    )
    p.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="every verdict with what was expected (default: the failures and warnings, what is left "
        "open, the box verdict)",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="print {run, fail_on, box, counts, unfinished, verdicts, rejected, open} as JSON",
    )
    p.set_defaults(func=main)


def main(args) -> int:
    try:
        run, verdicts = load_checked(args.run_dir)
        problem = run_schema.unrecorded_problem(run.manifest)
        if problem:
            raise RunDirError(run.path / RunDir.MANIFEST, problem)
    except (FileNotFoundError, RunDirError) as e:
        return usage_error(str(e))
    verdicts = sorted(verdicts, key=lambda v: (ORDER[v.status], v.id))
    counts = status_counts(verdicts)
    box = box_verdict(run.manifest, verdicts, args.fail_on)
    if args.json:
        print(
            strict_json.dumps(
                {
                    "run": str(run.path),
                    "fail_on": args.fail_on,
                    "box": box.word,
                    "counts": counts,
                    "unfinished": unfinished(run.manifest, verdicts),
                    "verdicts": [v.to_dict() for v in verdicts],
                    "rejected": box.rejected,
                    "open": [{"id": o.id, "why": o.why} for o in box.open],
                },
                indent=2,
            )
        )
    else:
        print_table(run, verdicts, counts, box, args.fail_on, verbose=args.verbose)
    return box.exit_code


def print_table(
    run: RunDir,
    verdicts: list[Verdict],
    counts: dict[str, int],
    box: BoxVerdict,
    fail_on: str,
    verbose: bool = False,
) -> None:
    """Concise by default: what failed or warned, what did not run, what is open, the box verdict; -v: every
    verdict with what was expected."""
    stopped = unfinished(run.manifest, verdicts)
    shown = verdicts if verbose else [v for v in verdicts if v.status in ("fail", "warn")]
    width = max([len(v.id) for v in shown] + [7])
    if shown:
        print(
            f"{'status':<6}  {'verdict':<{width}}  "
            + ("observed (expected) — reason" if verbose else "what was seen — what to do")
        )
    for v in shown:
        reason = next((line for line in v.reason.splitlines() if line.strip()), "")
        detail = (
            f"{v.observed} ({v.expected}) — {reason}"
            if verbose
            else reason
            if v.observed in reason
            else f"{v.observed} — {reason}"
        )
        print(f"{v.status.upper():<6}  {v.id:<{width}}  {detail}")
    if not verbose and len(shown) < len(verdicts):
        print(
            f"({len(verdicts) - len(shown)} verdicts passed or skipped: python -m suite check -v {run.path} "
            f"lists each)"
        )
    for stage in stopped:
        print(
            f"{'NORUN':<6}  "
            f"{stage:<{width}}  stage did not complete — resume: python -m suite run --resume {run.path}"
        )
    print(summary_line(counts) + (f", {len(stopped)} did not run" if stopped else ""))
    if box.open and box.word != "REHEARSAL":
        print(f"left open ({len(box.open)}):")
        for o in box.open:
            print(f"  {o.line()}")
        print("to decide them:")
        print("\n".join(next_steps.lines(box.open, run.manifest, "  - ", shown=4)))
    print(f"box verdict: {box.line()} (--fail-on {fail_on})")
