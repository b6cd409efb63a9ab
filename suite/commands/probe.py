"""python -m suite probe: which collective and point-to-point primitives the backend supports, tried for real.

    python -m suite probe                          # gloo on 4 CPU processes (the gloo-cpu profile)
    python -m suite probe --profile nccl-gpu       # NCCL, one process per GPU
    python -m suite probe --json

One launch on the profile's ranks tries each primitive once (suite/workloads/probe.py) and checks its
result elementwise; it prints one line per primitive: ok, wrong (supported, but the values are wrong),
error (unsupported here, with the error's first line) or not run. Exit 0 when nothing is wrong, 1 when a
primitive returned wrong values or did not report, 2 on unusable input or a launch that failed.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from suite import strict_json
from suite.commands import usage_error
from suite.config import PROFILES, ProfileError, get_profile
from suite.workloads.worker_cli import mistakes_from


def add_parser(sub) -> None:
    p = sub.add_parser(
        "probe", help="try every collective and point-to-point primitive once on the profile's ranks"
    )
    p.add_argument(
        "--profile",
        default="gloo-cpu",
        choices=sorted(PROFILES),
        help="gloo-cpu: CPU processes on gloo; nccl-gpu: one process per GPU (default gloo-cpu)",
    )
    p.add_argument("--nproc", type=int, help="processes (default: the profile's)")
    p.add_argument(
        "--raw-dir",
        type=Path,
        metavar="DIR",
        help="keep the workers' logs and rows here (default: a temporary folder, removed after)",
    )
    p.add_argument(
        "--mistakes", default="", help="deliberate mistakes for the tests: wrong.<primitive>, comma-separated"
    )
    p.add_argument("--json", action="store_true", help="print the results as a JSON list of objects")
    p.set_defaults(func=main)


def run_probe(profile, raw_dir: Path, mistakes: str = "", timeout_s: float | None = None):
    """The probe's rows from one launch of suite.workloads.probe."""
    from suite.launch.torchrun import run_torchrun

    args = ["--stage", "probe"] + (["--mistakes", mistakes] if mistakes else [])
    return run_torchrun(
        profile,
        "suite.workloads.probe",
        args,
        raw_dir=raw_dir,
        tag="probe",
        timeout_s=timeout_s or profile.stage_timeout_s,
    ).rows()


def main(args) -> int:
    from suite.launch.torchrun import LaunchError
    from suite.stages._probe import STATUS_OF, summarize, unknown_mistakes

    if args.nproc is not None and args.nproc < 1:
        return usage_error("--nproc must be at least 1")
    problem = unknown_mistakes(mistakes_from(args))
    if problem:
        return usage_error(problem)
    try:
        profile = get_profile(args.profile, args.nproc)
    except ProfileError as e:
        return usage_error(str(e))
    with tempfile.TemporaryDirectory(prefix="cardtime-probe-") as tmp:
        raw = args.raw_dir or Path(tmp)
        try:
            rows = run_probe(profile, raw, args.mistakes)
        except LaunchError as e:
            return usage_error(
                f"{e} (exit code {e.exit_code}): rerun with --raw-dir DIR and read DIR/probe.rank0.log"
            )
    results = summarize(rows)
    if args.json:
        print(
            strict_json.dumps(
                [
                    {"primitive": r.name, "status": r.status, "detail": r.detail, "ranks": r.ranks}
                    for r in results
                ],
                indent=2,
            )
        )
    else:
        print(f"{profile.backend} on {profile.nproc} {profile.device} ranks:")
        for r in results:
            print(f"  {r.name:<24} {r.status:<8} {r.detail}")
    return 1 if any(STATUS_OF[r.status] == "fail" for r in results) else 0
