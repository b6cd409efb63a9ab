"""python -m suite share RUN_DIR [--out FILE] [--provider P --region R --price-per-hour X]: a small summary
of the run others can import into their library (`suite library import FILE`): headline figures, verdicts,
versions and the topology's shape; no host name, address, serial or credential. Labels go in only when given.
The format: docs/library.md.
"""

from __future__ import annotations

from pathlib import Path

from suite.commands import _numbers as numbers
from suite.commands import usage_error


def add_parser(sub) -> None:
    p = sub.add_parser(
        "share", help="a run's summary to share: figures and verdicts, no host names (RUN/summary.json)"
    )
    p.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="the run directory")
    p.add_argument("--out", type=Path, default=None, help="where to write it (default RUN_DIR/summary.json)")
    p.add_argument("--provider", default=None, help="the provider, as you name it (left out unless given)")
    p.add_argument("--region", default=None, help="the region (left out unless given)")
    p.add_argument(
        "--price-per-hour", type=numbers.not_negative, default=None, help="$/hour (left out unless given)"
    )
    p.set_defaults(func=main)


def main(args) -> int:
    from suite.library.share import share

    if not (args.run_dir / "manifest.json").is_file():
        return usage_error(f"{args.run_dir} is not a run directory (no manifest.json)")
    labels = {"provider": args.provider, "region": args.region, "price_per_hour": args.price_per_hour}
    path = share(args.run_dir, args.out, labels)
    print(f"summary: {path} (import it elsewhere with: python -m suite library import {path.name})")
    return 0
