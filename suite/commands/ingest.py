"""python -m suite ingest FILE_OR_DIR… [--out runs/] [--gpu-model NAME]: judge raw outputs captured on any
box.

    python -m suite ingest topo.txt all_reduce_perf.out --gpu-model "NVIDIA H100 80GB HBM3"

Exit codes as `suite run`'s: 0 no fail verdict, 1 a fail verdict — or a partial capture (an excerpt, a shell
prompt is fine; `....`, a table or -q cut short is not) unless --allow-partial, 2 nothing among the files
could be used. The box verdict (ACCEPT / REJECT / INCONCLUSIVE, with what is left open) is printed last;
`suite check RUN_DIR` exits on it (0 / 1 / 3).
"""

from __future__ import annotations

import sys
from pathlib import Path

from suite.commands import record_last, record_last_problem, usage_error


def add_parser(sub) -> None:
    p = sub.add_parser(
        "ingest",
        help="judge captured raw outputs (nvidia-smi, nvlink, ibstat, dcgmi, kernel logs, "
        "nccl-tests, nsys) into a run directory",
    )
    p.add_argument(
        "paths",
        nargs="+",
        type=Path,
        metavar="FILE_OR_DIR",
        help="captured outputs, or folders of them: each file's kind is read from its content",
    )
    p.add_argument(
        "--out", type=Path, default=Path("runs"), metavar="DIR", help="folder for the new run directory"
    )
    p.add_argument(
        "--gpu-model",
        metavar="NAME",
        help="the box's GPU (e.g. 'NVIDIA H100 80GB HBM3') where the captures do not name it",
    )
    p.add_argument(
        "--allow-partial",
        action="store_true",
        help="exit 0 (not 1) when a capture is partial: an excerpt, a table or -q cut short (its checks are "
        "judged on what it holds either way, and a pass it would give is left open)",
    )
    p.add_argument("--record-last", type=Path, metavar="FILE", help="write the run directory's path to FILE")
    p.set_defaults(func=main)


def main(args) -> int:
    from reports.report import render_path, standing_lines
    from suite import next_steps
    from suite.box_verdict import box_verdict
    from suite.ingest import feed, inputs
    from suite.library.index import add_run, default_path

    if args.record_last and (problem := record_last_problem(args.record_last, args.paths)):
        # before any work: a FIFO there would block the last step
        return usage_error(f"--record-last: {problem}")
    files, unused = inputs.files_of(args.paths)
    captures = []
    for path in files:
        got = inputs.read(path)
        if isinstance(got, inputs.Unused):
            unused.append(got)
        else:
            captures += got
    plan = feed.assign(captures)
    order = {path: i for i, path in enumerate(files)}
    plan.unused = sorted(unused + plan.unused, key=lambda u: order.get(u.path, -1))  # as the files were named
    for u in plan.unused:
        print(u.line(), file=sys.stderr)
    if not plan.feeds:
        return usage_error(f"nothing usable among {len(files)} file(s): ingest reads {inputs.KNOWN}")
    try:
        outcome = feed.build(plan, args.out, list(args.paths), args.gpu_model)
    except OSError as e:
        return usage_error(
            f"cannot write the run directory under {args.out}: {e.strerror or e}; pass --out DIR"
        )
    try:
        record_last(args.record_last, outcome.run.path)
    except OSError as e:
        return usage_error(f"--record-last: {e}")
    out, view = render_path(outcome.run.path)
    # after the report (its medians leave this run out): the run read once
    indexed = add_run(outcome.run.path, origin="ingested", library=default_path(args.out), view=view)
    print(f"run directory: {outcome.run.path}", file=sys.stderr)
    print(f"report: {out}", file=sys.stderr)
    print(f"summary: {outcome.summary()}", file=sys.stderr)
    print(indexed, file=sys.stderr)
    for line in standing_lines(view):
        print(f"stands: {line}", file=sys.stderr)
    box = box_verdict(outcome.run.manifest, outcome.run.verdicts())
    print(f"box verdict: {box.line()}", file=sys.stderr)
    for o in box.open:
        print(f"  open: {o.line()}", file=sys.stderr)
    for line in next_steps.lines(box.open, outcome.run.manifest, "  next: "):
        print(line, file=sys.stderr)
    partial = feed.partial_captures(plan)
    for line in partial:
        print(f"partial: {line}", file=sys.stderr)
    # The box verdict's exit code, as `suite check` gives it for this run (0 ACCEPT, 1 REJECT, 3
    # INCONCLUSIVE): a script reading either command reads the same answer.
    if partial and not args.allow_partial:
        print(
            f"{len(partial)} partial capture(s): pass --allow-partial to accept what they hold",
            file=sys.stderr,
        )
        return box.exit_code or 1
    return box.exit_code
