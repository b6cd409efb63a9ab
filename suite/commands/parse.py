"""python -m suite parse topo|p2p|nccl-tests|trace|smi-q|nvlink|ibstat|dcgm|xid FILE [--json]: a tool's raw
output as the suite reads it.

Exit status: 0 the file parsed; 1 a partial capture — an nccl-tests run that stops short (it aborted or hung),
a `-q` with fewer GPU blocks than `Attached GPUs` or a block cut before a section it always prints, a dcgmi
table without its closing border, an excerpt (`....`, `[...]`, a value written `...`): `complete: false`, what
it holds still printed and judged — unless --allow-partial (a shell prompt line above the output is dropped,
fine); 2 the file is missing, a directory, unreadable, or not the kind of output named.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

from suite import strict_json
from suite.commands import usage_error
from suite.parsers import ParseError
from suite.regular_files import not_regular_problem

# kind → module with parse_file(path) -> JSON-ready dict (raises ParseError on input it cannot read)
PARSERS = {
    "topo": "suite.parsers.topo",
    "p2p": "suite.parsers.p2p",  # nvidia-smi topo -p2p r|w|rw
    "nccl-tests": "suite.parsers.nccl_tests",
    "trace": "suite.parsers.traces",
    "smi-q": "suite.parsers.smi_health",
    "nvlink": "suite.parsers.nvlink",
    "ibstat": "suite.parsers.ibstat",
    "dcgm": "suite.parsers.dcgm",
    "xid": "suite.parsers.xid",
}

READ_WHOLE = ("trace", "nccl-tests")
"""Kinds whose parse_file reads the file itself, bounded (a trace is binary or JSON; nccl-tests' reader takes
its own prompt and banner lines)."""

HEALTH_VERDICTS = {
    "smi-q": ("suite.stages.health.rules", "smi_verdicts"),
    "nvlink": ("suite.stages.health.nvlink_rules", "nvlink_verdict"),
    "ibstat": ("suite.stages.health.rules", "network_verdict"),
    "dcgm": ("suite.stages.health.rules", "dcgm_verdict"),
    "xid": ("suite.stages.health.rules", "kernel_log_verdict"),
}
"""The health stage's rule (module, function) for one tool's output, imported only when that kind is read."""


LONG_OUTPUT_ROWS = 10_000


def add_parser(sub) -> None:
    p = sub.add_parser(
        "parse",
        help="parse a tool's raw output (nvidia-smi topo -m / -q / nvlink, nccl-tests, a trace, ibstat, "
        "dcgmi diag, a kernel log)",
    )
    p.add_argument("kind", choices=sorted(PARSERS), help="what the file holds")
    p.add_argument("file", type=Path, help="the raw output")
    p.add_argument("--json", action="store_true", help="print JSON (the default and only format)")
    p.add_argument(
        "--allow-partial",
        action="store_true",
        help="exit 0 for a capture that stops short or is an excerpt (default: exit 1, a pipeline must "
        "not take a truncated capture for a whole one)",
    )
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
        data = (
            module.parse_file(args.file)
            if args.kind in READ_WHOLE
            else parse_pasted(args.kind, module, args.file)
        )
    except ParseError as e:
        return usage_error(f"{args.file}: {e}")
    except UnicodeDecodeError as e:
        return usage_error(f"{args.file}: not text ({e.reason} at byte {e.start})")
    except PermissionError:
        return usage_error(f"{args.file}: not readable (permission denied): check the file's owner and mode")
    except OSError as e:
        return usage_error(f"{args.file}: cannot be read ({e.strerror or e})")
    if args.kind == "topo":  # the parser returns the parse; the verdicts are the topology stage's rules
        from suite.stages.topology.rules import verdicts_for_parse

        data["verdicts"] = [v.to_dict() for v in verdicts_for_parse(data)]
    elif args.kind in HEALTH_VERDICTS:  # the health stage's rules on this one tool's output
        module, rule = HEALTH_VERDICTS[args.kind]
        found = getattr(importlib.import_module(module), rule)(data)
        data["verdicts"] = [v.to_dict() for v in (found if isinstance(found, list) else [found])]
    # Indented for reading; a long sweep on one line: json's C encoder writes only unindented text (seconds,
    # not minutes, for a million rows).
    rows = data.get("rows") if isinstance(data, dict) else None
    print(strict_json.dumps(data, indent=None if len(rows or ()) > LONG_OUTPUT_ROWS else 2, default=str))
    if data.get("complete") is False and not args.allow_partial:
        print(
            f"partial: {args.file}: {data.get('reason') or 'the output stops short'}; "
            "pass --allow-partial to accept what it holds",
            file=sys.stderr,
        )
        return 1
    return 0


def parse_pasted(kind: str, module, path: Path) -> dict:
    """A text capture as pasted (suite/parsers/pasted.py): a prompt line above it dropped, an excerpt's marks
    dropped and the parse said partial (complete: false), as a cut nccl-tests run is."""
    from suite.parsers.pasted import clean

    pasted = clean(path.read_text(encoding="utf-8"))
    if kind == "smi-q":
        data = module.parse(pasted.text, partial_ok=True)
    elif kind == "nvlink":  # nvidia-smi nvlink -s/-e, or dcgmi nvlink --link-status
        data = module.parse_any(pasted.text)
    else:
        data = module.parse(pasted.text)
    data = data.to_dict() if hasattr(data, "to_dict") else data
    if pasted.partial:
        data["complete"] = False
        data["reason"] = "; ".join(filter(None, [*pasted.partial, data.get("reason")]))
    if pasted.notes:
        data["notes"] = [*data.get("notes", []), *pasted.notes]
    return data
