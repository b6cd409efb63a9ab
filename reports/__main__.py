"""python -m reports RUN_DIR [-o OUT] | python -m reports compare RUN_A RUN_B ... [-o OUT]

    python -m reports runs/20261129T1630Z-box-gloo-cpu
    report: runs/20261129T1630Z-box-gloo-cpu/report.html
    12 passed, 0 warned, 0 failed, 9 skipped

Exit status (130 at Ctrl-C, in one line): 0 when the report rendered (whatever the verdicts say; `python -m
suite check` judges those), 2 when nothing can be rendered: not a run directory, another schema version, none
of its records readable, or the output cannot be written. A damaged run directory whose records partly read (a
truncated manifest, an unreadable results.parquet, a verdict of an unknown status) still renders: the report
says at its top what is missing, and each missing part is printed here as `incomplete: …`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from suite import cli_streams, env_settings, path_names
from suite.output_target import overwrite_problem
from suite.results import RunDirError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m reports",
        description="Render a run directory's report.html, or compare runs.",
        epilog="python -m reports compare RUN_A RUN_B ... [-o OUT]: runs side by side "
        "(see python -m reports compare --help)",
    )
    parser.add_argument(
        "run_dir", type=Path, nargs="?", metavar="RUN_DIR", help="the run directory to report on"
    )
    parser.add_argument(
        "-o", "--out", type=Path, help="where to write the HTML (default RUN_DIR/report.html)"
    )
    return parser


def build_compare_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m reports compare",
        description="One report laying runs side by side; ratios are each run ÷ the first.",
    )
    parser.add_argument(
        "runs",
        type=Path,
        nargs="+",
        metavar="RUN_DIR",
        help="two or more run directories; the first is the baseline",
    )
    parser.add_argument(
        "-o",
        "--out",
        type=Path,
        default=Path("runs/compare.html"),
        help="where to write the HTML (default runs/compare.html)",
    )
    parser.add_argument(
        "--library",
        type=Path,
        nargs="?",
        const=Path(""),
        default=None,
        metavar="FILE",
        help="place each run among the other runs of its GPU model in the library instead (default FILE: "
        "runs/library.sqlite or CARDTIME_LIBRARY): percentile per figure, the nearest box, the cost per "
        "PFLOP-hour",
    )
    return parser


def error(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def main(argv: list[str] | None = None) -> int:
    # A GPU or host name from a capture reaches the terminal without its control bytes; a closed output: one
    # line.
    return cli_streams.guarded(lambda: _main_interruptible(argv))


def _main_interruptible(argv: list[str] | None) -> int:
    try:
        return _main(argv)
    # Ctrl-C: one line and the shell's 130, as `python -m suite` and provisioning answer
    except KeyboardInterrupt:
        print(
            "interrupted: stopped at Ctrl-C before the page was written (an earlier one is left as it was)",
            file=sys.stderr,
        )
        return 130


def _main(argv: list[str] | None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if bad := env_settings.problem():  # HOME / XDG_CACHE_HOME name the figure cache
        return error(bad)
    compare = argv[:1] == ["compare"]
    args = build_compare_parser().parse_args(argv[1:]) if compare else build_parser().parse_args(argv)
    if bad := path_names.args_problem(args):  # a latin-1 folder: refused before the page is written
        return error(bad)
    if compare:
        return main_compare(args)
    if args.run_dir is None:
        return error(
            "name a run directory: python -m reports runs/<run-id> (make rehearse leaves the last in "
            "runs/LAST)"
        )
    from reports.report import render_path, standing_lines, summary

    if args.out and (problem := overwrite_problem(args.out, [args.run_dir])):
        return error(problem)
    try:
        out, view = render_path(args.run_dir, args.out)
    except (FileNotFoundError, RunDirError) as e:
        return error(str(e))
    except OSError as e:
        return error(f"cannot write the report to {e.filename or args.out}: {e.strerror or e}")
    for problem in view.problems:
        print(f"incomplete: {problem}", file=sys.stderr)
    print(f"report: {out}")
    print(f"summary: {summary(view.counts())}")
    for line in standing_lines(view):
        print(f"stands: {line}")
    return 0


def main_compare(args) -> int:
    if args.library is not None:
        from suite.library.index import default_path

        chosen = args.library if str(args.library) not in ("", ".") else default_path()
        return place_in_library(args.runs, chosen)
    if len(args.runs) < 2:
        return error("compare needs at least two run directories: python -m reports compare runs/a runs/b")
    from reports.compare import render_compare

    if problem := overwrite_problem(args.out, args.runs):
        return error(problem)
    try:
        out, comparison = render_compare(args.runs, args.out)
    except (FileNotFoundError, RunDirError) as e:
        return error(str(e))
    except OSError as e:
        return error(f"cannot write the comparison to {e.filename or args.out}: {e.strerror or e}")
    for run in comparison.runs:  # as a single report says what it lacks: each run's missing parts, named
        for problem in run.view.problems if run.view else []:
            print(f"incomplete: {run.label} ({run.path}): {problem}", file=sys.stderr)
    print(f"comparison: {out}")
    for line in comparison.summary_lines():
        print(line)
    return 0


def place_in_library(runs: list[Path], library: Path) -> int:
    """`compare --library`: each run placed among the other runs of its model (suite/library/place.py)."""
    from suite.library import index
    from suite.library.place import placement
    from suite.library.summary import summarize

    if not library.is_file():
        return error(f"no library at {library}: `python -m suite library add RUN_DIR…` makes one")
    for run in runs:
        if not (run / "manifest.json").is_file():
            return error(f"{run} is not a run directory (no manifest.json)")
    with index.opened(library) as db:
        for run in runs:
            print(f"{run}:")
            for line in placement(db, summarize(run)):
                print(f"  {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
