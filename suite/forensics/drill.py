"""A launch that goes wrong on purpose, for the forensics to name: every rank all-reduces; one rank, before
collective #AT, stops itself (SIGSTOP), sleeps, or dies (SIGKILL).

    python -m torch.distributed.run --nproc-per-node 4 -m suite.forensics.drill --kind stop --rank 2 --at 6

The expected answer is known from the arguments: rank RANK, on this host, and all_reduce #AT of the default
group (Flight Recorder counts a group's collectives from 1; the group's set-up barrier is not one of them).
"""

from __future__ import annotations

import argparse
import os
import signal
import time

import torch
import torch.distributed as dist

from suite.workloads.worker import worker_session

KINDS = ("stop", "sleep", "kill")


def misbehave(kind: str) -> None:
    if kind == "stop":
        os.kill(os.getpid(), signal.SIGSTOP)
    elif kind == "sleep":
        time.sleep(3600)  # a rank stuck in Python before its collective
    elif kind == "kill":
        os.kill(os.getpid(), signal.SIGKILL)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m suite.forensics.drill")
    parser.add_argument("--kind", choices=KINDS, required=True)
    parser.add_argument("--rank", type=int, required=True, help="the rank that misbehaves")
    parser.add_argument("--at", type=int, default=6, help="before which all_reduce of the group (from 1)")
    args = parser.parse_args(argv)
    with worker_session(timeout_s=3600) as w:
        x = torch.ones(1024)
        for n in range(1, args.at + 1):
            if n == args.at and w.rank == args.rank:
                misbehave(args.kind)
            dist.all_reduce(x)


if __name__ == "__main__":
    main()
