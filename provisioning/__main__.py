"""python -m provisioning remote | status | plan | archive | slurm — the laptop's side (see
provisioning/remote.py and drive.py, provisioning/slurm/driver.py) — and image-build | image-push |
rehearse-docker (provisioning/runtime/container_cli.py).

    python -m provisioning remote --host root@203.0.113.7:2222 --profile nccl-gpu --archive s3://b/cardtime
    python -m provisioning status --host root@203.0.113.7:2222
    python -m provisioning archive runs/20261129T1630Z-box-nccl-gpu s3://bucket/cardtime

The Makefile's `remote`, `remote-status` targets map HOST=, KEY=, SSH_CONFIG=, RUNTIME=, IMAGE=, CUDA_LINE=,
PROFILE=, STAGES=, ARCHIVE=, REMOTE_DIR=, ALLOW_DIRTY=1, ACCEPT_NEW_HOST=1, NEW_RUN=1, FETCH=<job-id>,
FETCH_EXPORTS=1 onto these flags.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

import paramiko

from provisioning.job.archive import ArchiveError, archive_run
from provisioning.job.codesync import DirtyTree
from provisioning.runtime.engine import EngineError
from provisioning.session.connection import RemoteError
from provisioning.session.hosts import HostSpecError
from suite import cli_streams, env_settings, path_names
from suite.commands._numbers import not_negative


def add_connection_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host", required=True, help="user@host[:port]")
    p.add_argument("--key", default=None, help="private key file (default: ssh-agent and ~/.ssh/config)")
    p.add_argument("--known-hosts", default=None, help="known_hosts file (default: ssh's UserKnownHostsFile)")
    p.add_argument(
        "--ssh-config",
        default=None,
        help="ssh_config file (default ~/.ssh/config); HOST is resolved by `ssh -G`, aliases and Include too",
    )
    p.add_argument(
        "--accept-new-host",
        default="0",
        help="1: accept an unknown host key on first use, print its fingerprint and record it",
    )
    p.add_argument(
        "--remote-dir",
        default="",
        help="folder on the host (relative to its home unless absolute); default: "
        "cardtime/ on a mounted persistent volume (/workspace), else ~/cardtime",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m provisioning", description="Drive a rented host from the laptop."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("remote", help="run the suite on HOST and bring the run back")
    add_connection_args(p)
    p.add_argument("--profile", default="nccl-gpu", help="suite profile (default nccl-gpu)")
    p.add_argument("--stages", default="", help="only these stages, e.g. topology,bandwidth")
    p.add_argument(
        "--tier",
        default="",
        choices=["", "quick", "standard", "soak"],
        help="a time-boxed run (suite/plan/tiers.py)",
    )
    p.add_argument("--burnin-min", default="", help="the burn-in's minutes (BURNIN_MIN=), with --tier")
    p.add_argument(
        "--nccl-env",
        default="",
        help="NCCL_ENV=: a file of NCCL/libfabric/UCX/CUDA settings (NAME=value a line) for every rank of "
        "every node (suite/run_env.py)",
    )
    p.add_argument(
        "--runtime",
        default="",
        choices=["", "docker", "host"],
        help="docker (default with Docker + NVIDIA runtime) or host (the host's Python in a venv)",
    )
    p.add_argument("--image", default="", help="RUNTIME=docker: pull this image instead of building it")
    p.add_argument(
        "--cuda-line",
        default="",
        help="cu130 | cu126 (suite/hardware/cuda_lines.py); default: the newest the driver runs",
    )
    p.add_argument("--archive", default="", help="s3://bucket/prefix (or a folder); empty: local folder only")
    p.add_argument(
        "--endpoint-url",
        default=os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL"),
        help="S3-compatible endpoint (default: AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL)",
    )
    p.add_argument(
        "--allow-dirty", default="0", help="1: run HEAD even with uncommitted changes (loud warning)"
    )
    p.add_argument(
        "--new-run", default="0", help="1: start a new run even if the same one finished on the host"
    )
    p.add_argument(
        "--detach", default="", choices=["", "tmux", "setsid"], help="default: tmux when the host has it"
    )
    p.add_argument(
        "--fetch",
        default="",
        metavar="JOB_ID",
        type=lambda t: job_id_arg(t) if t else "",
        help="fetch, report and archive this job's run (follow it first if it still runs); start nothing",
    )
    p.add_argument(
        "--fetch-exports",
        default="0",
        help="1: fetch regenerable exports too (nsys SQLite beside its report)",
    )
    p.add_argument(
        "--hosts", default="", help="HOSTS=a,b: the nodes of a multi-node run (the first is --host)"
    )
    p.add_argument("--hostfile", default="", help="HOSTFILE=path: the nodes one a line instead of HOSTS=")
    p.add_argument(
        "--node-ssh-config",
        default="",
        help="HOSTS=: the ssh_config on the first node it reaches the "
        "others with (default: its ~/.ssh/config)",
    )
    p.add_argument(
        "--socket-ifname", default="", help="HOSTS=: the interface gloo/NCCL use between nodes (e.g. ens5)"
    )
    p.add_argument(
        "--nproc",
        default="",
        help="NPROC=: processes per node, at most its GPUs (default: one per GPU "
        "nvidia-smi -L lists; suite/world.py)",
    )
    p.add_argument(
        "--node-addrs",
        default="",
        help="HOSTS=: each node's address toward the others, in HOSTS' order "
        "(default: HOSTFILE's addr= column, else asked of the nodes)",
    )
    p.add_argument(
        "--master-port", default="", help="HOSTS=: the rendezvous port on the first node (default 29400)"
    )
    p.add_argument(
        "--runs-dir", type=Path, default=Path("runs"), help="local folder for fetched runs (default runs/)"
    )
    p.set_defaults(func=cmd_remote)
    s = sub.add_parser("status", help="where the host's latest run is")
    add_connection_args(s)
    s.set_defaults(func=cmd_status)
    pl = sub.add_parser("plan", help="the plan (python -m suite plan) for the GPUs HOST actually has")
    add_connection_args(pl)
    pl.add_argument("--profile", default="nccl-gpu")
    pl.add_argument("--rate", type=not_negative, default=None, help="price of the host, $/hour")
    pl.add_argument(
        "--nproc", default="", help="NPROC=: the processes make remote will start (default: one per GPU)"
    )
    pl.set_defaults(func=cmd_plan)
    a = sub.add_parser(
        "archive", help="upload a run directory to s3://bucket/prefix/<run-id>/ (or copy to a folder)"
    )
    a.add_argument("run_dir", type=Path)
    a.add_argument("dest", help="s3://bucket/prefix or a folder")
    a.add_argument("--endpoint-url", default=None, help="S3-compatible endpoint")
    a.set_defaults(func=cmd_archive)
    from provisioning.slurm.cli import add_parser as add_slurm  # make slurm SLURM_HOST=…

    add_slurm(sub, add_connection_args)
    # image-build, image-push, rehearse-docker (the Makefile's image targets)
    from provisioning.runtime.container_cli import (
        add_commands,
    )

    add_commands(sub)
    return parser


def job_id_arg(text: str) -> str:
    """FETCH=<job-id>: a name from `make remote-status`, never a path on the host."""
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", text):
        raise argparse.ArgumentTypeError(f"FETCH={text!r} is not a job id (make remote-status lists them)")
    return text


def cmd_remote(args) -> int:
    from provisioning.remote import options, remote_main

    return remote_main(options(args))


def cmd_status(args) -> int:
    from provisioning.job.remote_status import status_main
    from provisioning.remote import options

    return status_main(options(args))


def cmd_plan(args) -> int:
    from provisioning.job.remote_status import plan_main
    from provisioning.remote import options

    return plan_main(options(args), args.profile, args.rate)


def cmd_archive(args) -> int:
    archive_run(args.run_dir, args.dest, endpoint_url=args.endpoint_url)
    return 0


def main(argv: list[str] | None = None) -> int:
    # What a rented box prints (names, errors) reaches the laptop's terminal inert; a closed output: one line.
    return cli_streams.guarded(lambda: _main(argv))


def _main(argv: list[str] | None) -> int:
    args = build_parser().parse_args(argv)
    if bad := env_settings.problem() or path_names.args_problem(args):  # before the first connection
        print(f"error: {bad}", file=sys.stderr)
        return 2
    try:
        return args.func(args)
    except (HostSpecError, DirtyTree, ArchiveError, RemoteError, EngineError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except (OSError, EOFError, paramiko.SSHException) as e:
        # A connection that failed outside a wrapped step (mid-SFTP transfer, say): one line, no traceback.
        print(
            f"error: {type(e).__name__}: {e}\n  next: rerun the same make command: it re-attaches or resumes",
            file=sys.stderr,
        )
        return 2
    except KeyboardInterrupt:
        print(
            "\ninterrupted: a detached run goes on on the host; rerun the same command to re-attach",
            file=sys.stderr,
        )
        return 130


if __name__ == "__main__":
    sys.exit(main())
