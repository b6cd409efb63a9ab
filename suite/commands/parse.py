"""python -m suite parse topo|nccl-tests|trace|smi-q|nvlink|ibstat|dcgm|xid FILE [--json]: a tool's raw output as the suite reads it.

Exit status: 0 the file parsed; 1 an nccl-tests capture that stops short (the run aborted or hung, or
the capture was cut: `complete: false`; the rows it holds are still printed), unless --allow-partial;
2 the file is missing, a directory, unreadable, or not the kind of output named.
"""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

from suite.regular_files import not_regular_problem

from ..parsers import ParseError
from . import usage_error

# kind → module with parse_file(path) -> JSON-ready dict (raises ParseError on input it cannot read)
PARSERS = {
    "topo": "suite.parsers.topo",
    "nccl-tests": "suite.parsers.nccl_tests",
    "trace": "suite.parsers.traces",
    "smi-q": "suite.parsers.smi_health",
    "nvlink": "suite.parsers.nvlink",
    "ibstat": "suite.parsers.ibstat",
    "dcgm": "suite.parsers.dcgm",
    "xid": "suite.parsers.xid",
}

HEALTH_VERDICTS = {"smi-q": "smi_verdicts", "nvlink": "nvlink_verdict", "ibstat": "network_verdict",
                   "dcgm": "dcgm_verdict", "xid": "kernel_log_verdict"}


def add_parser(sub) -> None:
    p = sub.add_parser("parse", help="parse a tool's raw output (nvidia-smi topo -m / -q / nvlink, nccl-tests, a trace, ibstat, dcgmi diag, a kernel log)")
    p.add_argument("kind", choices=sorted(PARSERS), help="what the file holds")
    p.add_argument("file", type=Path, help="the raw output")
    p.add_argument("--json", action="store_true", help="print JSON (the default and only format)")
    p.add_argument("--allow-partial", action="store_true",
                   help="exit 0 for an nccl-tests capture that stops short (default: exit 1, a pipeline must not "
                        "take a truncated capture for a whole one)")
    p.set_defaults(func=main)


def main(args) -> int:
    if not args.file.exists():
        return usage_error(f"{args.file}: no such file")
    if args.file.is_dir():
        return usage_error(f"{args.file}: a directory; name one file of {args.kind} output inside it")
    problem = not_regular_problem(args.file)
    if problem:
        return usage_error(f"{args.file}: {problem}")
    module = importlib.import_module(PARSERS[args.kind])
    try:
        data = module.parse_file(args.file)
    except ParseError as e:
        return usage_error(f"{args.file}: {e}")
    except UnicodeDecodeError as e:
        return usage_error(f"{args.file}: not text ({e.reason} at byte {e.start})")
    except PermissionError:
        return usage_error(f"{args.file}: not readable (permission denied): check the file's owner and mode")
    except OSError as e:
        return usage_error(f"{args.file}: cannot be read ({e.strerror or e})")
    if args.kind == "topo":  # the parser returns the parse; the verdicts are the topology stage's rules
        from ..stages._topology_rules import verdicts_for_parse
        data["verdicts"] = [v.to_dict() for v in verdicts_for_parse(data)]
    elif args.kind in HEALTH_VERDICTS:  # the health stage's rules on this one tool's output
        from ..stages import _health_rules
        found = getattr(_health_rules, HEALTH_VERDICTS[args.kind])(data)
        data["verdicts"] = [v.to_dict() for v in (found if isinstance(found, list) else [found])]
    print(json.dumps(data, indent=2, allow_nan=False, default=str))
    if data.get("complete") is False and not args.allow_partial:
        print(f"partial: {args.file}: {data.get('reason') or 'the output stops short'}; "
              "pass --allow-partial to accept the rows it holds", file=sys.stderr)
        return 1
    return 0
