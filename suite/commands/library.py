"""python -m suite library [list|add|import|place]: the library of every box rented (suite/library/).

    python -m suite library                           # every run indexed, oldest first
    python -m suite library --gpu "H100 SXM" --verdict ACCEPT
    python -m suite library add runs/RUN --provider lambda --region us-east-1 --price-per-hour 23.92
    python -m suite library import alice-summary.json bob-summary.json
    python -m suite library place runs/RUN            # its percentile per figure among the others

The library is one SQLite file, --library (default runs/library.sqlite, beside the runs). `suite ingest` and
`make remote`'s fetch index every run they bring; `add` indexes one by hand or gives it its labels.
"""

from __future__ import annotations

from pathlib import Path

from suite.commands import _numbers as numbers
from suite.commands import usage_error

ACTIONS = ("list", "add", "import", "place")


def add_parser(sub) -> None:
    p = sub.add_parser(
        "library", help="every box you rented: list, add, import shared summaries, place a run"
    )
    p.add_argument(
        "action", nargs="?", choices=ACTIONS, default="list", help="list (default), add, import, place"
    )
    p.add_argument(
        "paths", nargs="*", type=Path, help="run directories (add, place) or summary files (import)"
    )
    p.add_argument(
        "--library",
        type=Path,
        default=None,
        help="the library (default runs/library.sqlite or CARDTIME_LIBRARY)",
    )
    p.add_argument(
        "--gpu", default=None, help="list: only this GPU model, as the GPU table names it ('H100 SXM')"
    )
    p.add_argument(
        "--verdict", default=None, help="list: only this box verdict (ACCEPT, REJECT, INCONCLUSIVE)"
    )
    p.add_argument("--provider", default=None, help="add: the provider, as you name it")
    p.add_argument("--region", default=None, help="add: the region, as you name it")
    p.add_argument("--price-per-hour", type=numbers.not_negative, default=None, help="add: the box's $/hour")
    p.set_defaults(func=main)


def library_path(args) -> Path:
    from suite.library import index

    return args.library or index.default_path()


def main(args) -> int:
    if args.action == "list":
        return list_runs(args)
    if not args.paths:
        wanted = "summary file" if args.action == "import" else "run directory"
        return usage_error(f"library {args.action}: name at least one {wanted}")
    if args.action == "import":
        return import_summaries(args)
    for run in args.paths:
        if not (run / "manifest.json").is_file():
            return usage_error(f"{run} is not a run directory (no manifest.json)")
    return add_runs(args) if args.action == "add" else place_runs(args)


def list_runs(args) -> int:
    from suite.library import index

    if not library_path(args).is_file():  # listing makes no library
        fill = "`suite ingest`, `make remote` and `suite library add` fill it"
        print(f"no library at {library_path(args)} yet: {fill}")
        return 0
    with index.opened(library_path(args)) as db:
        runs = index.listed(db, gpu_model=args.gpu, verdict=args.verdict)
    if not runs:
        print(
            f"the library ({library_path(args)}) holds no run"
            + (" of that kind" if args.gpu or args.verdict else "")
        )
        return 0
    for s in runs:
        figures = ", ".join(f"{m} {v:,.4g}" for m, v in s["figures"].items()) or "no headline figure"
        labels = " ".join(f"{k}={v}" for k, v in s["labels"].items())
        box = f"{s['gpu_count']}×{s['gpu_model']}" if s["gpu_model"] else "no GPU model"
        print(
            f"{s['date'] or '—'}  {s['key']}  {box}  {s['box_verdict']}  {figures}"
            + (f"  {labels}" if labels else "")
        )
    print(f"{len(runs)} run(s) in {library_path(args)}")
    return 0


def add_runs(args) -> int:
    from suite.library import index
    from suite.library.summary import summarize

    labels = {"provider": args.provider, "region": args.region, "price_per_hour": args.price_per_hour}
    with index.opened(library_path(args)) as db:
        for run in args.paths:
            summary = summarize(run, labels)
            index.add(db, summary, origin="added", path=str(run))
            model = summary["gpu_model"] or "no GPU model"
            print(f"indexed {run}: {summary['key']} ({model}, {summary['box_verdict']})")
    return 0


def place_runs(args) -> int:
    from reports.__main__ import place_in_library

    return place_in_library(list(args.paths), library_path(args))


def import_summaries(args) -> int:
    from suite.library.share import import_files

    refused = 0
    for path, why in import_files(library_path(args), list(args.paths)):
        if why:
            refused += 1
            print(f"refused {path}: {why}")
        else:
            print(f"imported {path}")
    return 1 if refused else 0
