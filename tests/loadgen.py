"""A load generator: busy loops in child processes, bounded in time, killed on exit.

    with busy_loops(4, max_s=600):          # four spinning processes beside the code under test
        run_the_rehearsal()

    python -m tests.loadgen --loops 4 --max-s 900 -- python -m pytest tests/e2e/test_rehearsal.py

A verdict that changes under this load depends on how busy the machine is, not on what the code does
(four loops on a 2-core machine leave each other process about a third of a core). Each loop is its own
process (threads would share one interpreter lock, which is not the load a neighbour makes), ends by itself
after `max_s` even if nobody stops it, and is killed when the block exits, however it exits.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
from typing import Iterator

SPIN = (
    "import time, sys\nend = time.monotonic() + float(sys.argv[1])\nwhile time.monotonic() < end:\n    pass\n"
)


@contextlib.contextmanager
def busy_loops(loops: int = 4, max_s: float = 600.0) -> Iterator[list[subprocess.Popen]]:
    """`loops` spinning processes for at most `max_s` seconds; stopped (SIGKILL, waited) when the block
    exits."""
    if loops < 0 or not max_s > 0:
        raise ValueError(f"loops {loops} must be ≥ 0 and max_s {max_s} > 0")
    children: list[subprocess.Popen] = []
    try:
        for _ in range(loops):
            children.append(
                subprocess.Popen(
                    [sys.executable, "-c", SPIN, str(max_s)],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
        yield children
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
        for child in children:
            child.wait()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--loops", type=int, default=int(os.environ.get("LOAD_LOOPS", "4")))
    p.add_argument("--max-s", type=float, default=3600.0, help="the loops end by themselves after this")
    p.add_argument(
        "command", nargs=argparse.REMAINDER, help="-- COMMAND ...: run under the load, exit with its code"
    )
    args = p.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        p.error("no command: python -m tests.loadgen -- COMMAND ...")
    with busy_loops(args.loops, args.max_s):
        child = subprocess.Popen(command)
        try:
            return child.wait()
        except KeyboardInterrupt:
            child.send_signal(signal.SIGINT)
            return child.wait()


if __name__ == "__main__":
    sys.exit(main())
