"""`cardtime`: the one command a renter needs, its main job first (pyproject.toml's console script).

    cardtime remote root@203.0.113.7:2222 --tier quick     test a rented box: run, fetch, report, archive
    cardtime plan --rate 24                                  before renting: minutes and cost per stage
    cardtime rehearse                                        the whole suite on this CPU, ending in a report

Each word hands the rest of the line to the command that does the work (`python -m provisioning`, `python -m
suite`, `python -m reports`): their options, help, errors and exit codes are the ones docs/guide.md's tables
give. The make targets stay as thin aliases of the same commands.
"""

from __future__ import annotations

import sys
from importlib import metadata
from pathlib import Path
from typing import Callable, Sequence

USAGE = """usage: cardtime COMMAND [ARGS…]   (cardtime COMMAND --help for its options)

Test a rented GPU box:
  remote USER@HOST[:PORT] [--tier quick|standard|soak] [--archive s3://bucket/prefix] …
                 run the suite on the box, fetch the run, render its report (`make remote HOST=…`)
  plan [--rate $/h] [--tier …] [--host USER@HOST]
                 before renting: each stage's minutes and the cost; with --host, for the GPUs it has
  slurm …        the same on a Slurm cluster (--host USER@LOGIN: from this laptop)

On this machine:
  rehearse [--stages a,b]
                 the whole suite on CPU (gloo, 4 processes): every check proven, ending in a report
  ingest FILE_OR_DIR…
                 judge outputs captured on any box (nvidia-smi, dcgmi, dmesg, nccl-tests, traces)
  check RUN      a run's box verdict: ACCEPT (0), REJECT (1), INCONCLUSIVE (3)
  report RUN     render RUN/report.html again
  compare RUN…   runs side by side

  --version      the version of cardtime
"""


def _provisioning(argv: list[str]) -> int:
    from provisioning.__main__ import main

    return main(argv)


def _suite(argv: list[str]) -> int:
    from suite.__main__ import main

    return main(argv)


def _reports(argv: list[str]) -> int:
    from reports.__main__ import main

    return main(argv)


def remote(args: list[str]) -> int:
    """`cardtime remote HOST …`: HOST may come first without --host, as a renter types it."""
    if args and not args[0].startswith("-"):
        args = ["--host", args[0], *args[1:]]
    return _provisioning(["remote", *args])


def plan(args: list[str]) -> int:
    """With --host the box's own GPUs are planned (over SSH); without, the profile's."""
    return _provisioning(["plan", *args]) if "--host" in args else _suite(["plan", *args])


def slurm(args: list[str]) -> int:
    return _provisioning(["slurm", *args]) if "--host" in args else _suite(["slurm", *args])


def rehearse(args: list[str]) -> int:
    """`make rehearse`: the gloo-cpu run, then its report; prints where the report is."""
    import tempfile

    runs = Path("runs")
    runs.mkdir(exist_ok=True)
    with tempfile.NamedTemporaryFile("r", dir=runs, prefix=".last.", delete=True) as last:
        code = _suite(["run", "--profile", "gloo-cpu", "--out", str(runs), "--record-last", last.name, *args])
        made = Path(last.name).read_text().strip()
        if not made:
            return code
        rendered = _reports([made])
        (runs / "LAST").write_text(made + "\n")
    return code or (1 if rendered else 0)


COMMANDS: dict[str, Callable[[list[str]], int]] = {
    "remote": remote,
    "plan": plan,
    "slurm": slurm,
    "rehearse": rehearse,
    "ingest": lambda args: _suite(["ingest", *args]),
    "check": lambda args: _suite(["check", *args]),
    "report": _reports,
    "compare": lambda args: _reports(["compare", *args]),
}


def version() -> str:
    try:
        return metadata.version("cardtime")
    except metadata.PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown (not installed: pip install -e .)"


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help", "help"):
        print(USAGE, end="")
        return 0 if args else 2
    if args[0] == "--version":
        print(f"cardtime {version()}")
        return 0
    command = COMMANDS.get(args[0])
    if command is None:
        print(f"error: {args[0]!r} is not a cardtime command (cardtime --help lists them)", file=sys.stderr)
        return 2
    return command(args[1:])


if __name__ == "__main__":
    sys.exit(main())
