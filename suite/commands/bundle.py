"""python -m suite bundle RUN_DIR [--scrub-hosts]: the evidence bundle for a provider's ticket.

    python -m suite bundle runs/20261207T2210Z-box-nccl-gpu --scrub-hosts

Writes RUN_DIR/bundle-<time>.tar.gz (suite/forensics/bundle.py) and prints its path and its manifest: what
each item is, where it came from, or why it is missing. Credentials are always removed; host names and
addresses only with --scrub-hosts.
"""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

from suite.commands import usage_error
from suite.forensics.bundle import make_bundle


def add_parser(sub) -> None:
    p = sub.add_parser("bundle", help="pack a run's evidence for the provider's ticket (RUN/bundle-*.tar.gz)")
    p.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="the run directory")
    p.add_argument(
        "--scrub-hosts", action="store_true", help="replace host names and addresses by host-N / addr-N"
    )
    p.set_defaults(func=main)


def main(args) -> int:
    if not (args.run_dir / "manifest.json").is_file():
        return usage_error(f"{args.run_dir} is not a run directory (no manifest.json)")
    path = make_bundle(args.run_dir, scrub_hosts=args.scrub_hosts)
    print(describe(path))
    return 0


def describe(path: Path) -> str:
    """The bundle's path and its manifest, one line an item."""
    with tarfile.open(path) as tar:
        book = json.load(tar.extractfile("bundle/MANIFEST.json"))
    lines = [f"evidence bundle: {path}"]
    for item in book["items"]:
        if item["included"]:
            lines.append(f"  + {item['item']}: {item['source']}")
        else:
            lines.append(f"  - {item['item']}: missing: {item['why_missing']}")
    lines.append(
        f"  credentials removed: {book['credentials_removed']}; host names and addresses "
        + ("scrubbed" if book["hosts_scrubbed"] else "kept (--scrub-hosts replaces them)")
    )
    return "\n".join(lines)
