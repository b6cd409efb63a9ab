"""python -m suite parse topo|nccl-tests|trace FILE [--json]: a tool's raw output as the suite reads it."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

from ..parsers import ParseError
from . import usage_error

# kind → module with parse_file(path) -> JSON-ready dict (raises ParseError on input it cannot read)
PARSERS = {
    "topo": "suite.parsers.topo",
    "nccl-tests": "suite.parsers.nccl_tests",
    "trace": "suite.parsers.traces",
}


def add_parser(sub) -> None:
    p = sub.add_parser("parse", help="parse a tool's raw output (nvidia-smi topo -m, nccl-tests, a trace)")
    p.add_argument("kind", choices=sorted(PARSERS), help="what the file holds")
    p.add_argument("file", type=Path, help="the raw output")
    p.add_argument("--json", action="store_true", help="print JSON (the default and only format)")
    p.set_defaults(func=main)


def main(args) -> int:
    if not args.file.exists():
        return usage_error(f"{args.file}: no such file")
    module = importlib.import_module(PARSERS[args.kind])
    try:
        data = module.parse_file(args.file)
    except ParseError as e:
        return usage_error(f"{args.file}: {e}")
    except UnicodeDecodeError as e:
        return usage_error(f"{args.file}: not text ({e.reason} at byte {e.start})")
    if args.kind == "topo":  # the parser returns the parse; the verdicts are the topology stage's rules
        from ..stages._topology_rules import verdicts_for_parse
        data["verdicts"] = [v.to_dict() for v in verdicts_for_parse(data)]
    print(json.dumps(data, indent=2, allow_nan=False, default=str))
    return 0
