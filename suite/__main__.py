"""python -m suite run | list | plan | parse | check | model — see `python -m suite --help`."""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys

from suite import cli_streams, commands, env_settings, path_names


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m suite",
        description="cardtime: benchmark a multi-GPU node stage by stage, rehearsed on CPU first.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{commands.__name__}.{info.name}")
        module.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    # Nothing a capture carries reaches the terminal as a control sequence; a closed output is one line, exit
    # 2.
    return cli_streams.guarded(lambda: _main(argv))


def _main(argv: list[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    # before any work: nothing started or written
    if bad := env_settings.problem() or path_names.args_problem(args):
        print(f"error: {bad}", file=sys.stderr)
        return 2
    try:
        return args.func(args)
    # Ctrl-C: one line, the shell's 130; a run's complete stages are kept (--resume)
    except KeyboardInterrupt:
        print(
            "interrupted: stopped at Ctrl-C (a run directory keeps its complete stages: --resume goes on)",
            file=sys.stderr,
        )
        return 130


if __name__ == "__main__":
    sys.exit(main())
