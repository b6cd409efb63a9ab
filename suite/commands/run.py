"""python -m suite run: run the stages into a run directory (or --list them, or --resume one)."""

from __future__ import annotations

import sys
from pathlib import Path

from .. import stages
from ..config import PROFILES, ProfileError, get_profile
from ..results import SchemaError
from . import usage_error


def add_parser(sub) -> None:
    p = sub.add_parser("run", help="run the stages in the checklist's order into runs/<run-id>/")
    p.add_argument("--profile", default="gloo-cpu", choices=sorted(PROFILES),
                   help="gloo-cpu: the CPU rehearsal; nccl-gpu: one process per GPU (default gloo-cpu)")
    p.add_argument("--stages", metavar="A,B", help="only these stages, e.g. topology,bandwidth (default: all)")
    p.add_argument("--list", action="store_true", help="list the stages in order and exit")
    p.add_argument("--out", type=Path, default=Path("runs"), metavar="DIR",
                   help="folder for new run directories (default runs/)")
    p.add_argument("--resume", type=Path, metavar="RUN_DIR",
                   help="continue this run: complete stages are kept, the others run")
    p.add_argument("--nproc", type=int, help="processes per node (default: the profile's; on a GPU box, its GPU count)")
    p.add_argument("--stage-timeout", type=float, metavar="SECONDS", help="override every stage's timeout")
    p.add_argument("--master-port", type=int, help="fixed rendezvous port (default: a free one per launch)")
    p.add_argument("--record-last", type=Path, metavar="FILE", help="write the run directory's path to FILE")
    p.set_defaults(func=main)


def list_stages() -> int:
    print(f"{'#':>2}  {'stage':<10} {'rehearsal':<9} measures")
    for n, name in enumerate(stages.available(), start=1):
        module = stages.load(name)
        face = "yes" if module.REHEARSAL else "no"
        print(f"{n:>2}  {name:<10} {face:<9} {module.MEASURES}")
        if module.REHEARSAL:
            print(f"{'':>2}  {'':<10} {'':<9} on CPU: {module.REHEARSAL}")
    return 0


def main(args) -> int:
    from .. import runner

    if args.list:
        return list_stages()
    try:
        if args.resume:
            if args.stages:
                return usage_error("--resume continues the run's own stage selection: drop --stages")
            run, profile = runner.resume_run(args.resume)
        else:
            profile = get_profile(args.profile, args.nproc)
            if args.master_port:
                profile = profile.with_overrides(master_port=args.master_port)
            run = runner.start_run(profile, stages.select(args.stages), args.out)
    except (ProfileError, stages.StageSelectionError, SchemaError, FileNotFoundError, FileExistsError) as e:
        return usage_error(str(e))
    if args.record_last:
        args.record_last.parent.mkdir(parents=True, exist_ok=True)
        args.record_last.write_text(str(run.path) + "\n")
    outcome = runner.execute(run, profile, stage_timeout_s=args.stage_timeout)
    print(f"run directory: {run.path}", file=sys.stderr)
    print(f"summary: {outcome.summary()} in {outcome.seconds:.1f} s", file=sys.stderr)
    return outcome.exit_code
