"""python -m suite slurm: write the batch script for a Slurm cluster (suite/slurm.py) and, with --submit, submit
it and follow the job until it leaves the queue (squeue: sacct needs accounting, which many clusters lack)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

from .. import stages
from ..config import PROFILES
from ..slurm import sbatch_script
from . import usage_error

POLL_S = 10.0


def add_parser(sub) -> None:
    p = sub.add_parser("slurm", help="write (and --submit) the sbatch script running the suite across NODES nodes")
    p.add_argument("--partition", required=True, help="the partition to run in")
    p.add_argument("--nodes", type=int, default=2, help="nodes to allocate (default 2)")
    p.add_argument("--gpus-per-node", type=int, default=8, help="GPUs (and ranks) per node (default 8)")
    p.add_argument("--account", default="", help="the account to charge, where the cluster asks for one")
    p.add_argument("--time", default="", metavar="HH:MM:SS", help="the job's time limit (default: the partition's)")
    p.add_argument("--profile", default="nccl-gpu", choices=sorted(PROFILES))
    p.add_argument("--stages", default="", metavar="A,B", help="only these stages (default: all)")
    p.add_argument("--container-image", default="", help="pyxis: run every srun in this image")
    p.add_argument("--out", type=Path, default=Path("runs"), help="the run directories' folder, on shared storage")
    p.add_argument("--submit", action="store_true", help="sbatch the script and follow the job")
    p.set_defaults(func=main)


def main(args) -> int:
    try:
        selected = ",".join(stages.select(args.stages)) if args.stages else ""
        text = sbatch_script(checkout=str(Path.cwd()), python=sys.executable, nodes=args.nodes,
                             gpus_per_node=args.gpus_per_node, partition=args.partition, account=args.account,
                             profile=args.profile, stages=selected, out=str(args.out.resolve()),
                             time_limit=args.time, container_image=args.container_image,
                             gpus=PROFILES[args.profile].device == "cuda")
    except (stages.StageSelectionError, ValueError) as e:
        return usage_error(str(e))
    args.out.mkdir(parents=True, exist_ok=True)
    script = args.out / f"cardtime-{datetime.now(timezone.utc):%Y%m%dT%H%M%SZ}.sbatch"
    script.write_text(text)
    print(f"batch script: {script}", file=sys.stderr)
    if not args.submit:
        return 0
    if shutil.which("sbatch") is None:
        return usage_error("sbatch is not on PATH: run this on the cluster's login node")
    done = subprocess.run(["sbatch", "--parsable", str(script)], capture_output=True, text=True)
    if done.returncode != 0:
        return usage_error(f"sbatch refused the script: {done.stderr.strip().splitlines()[-1:] or done.returncode}")
    job = done.stdout.strip().split(";")[0]
    print(f"submitted job {job}; following it with squeue", file=sys.stderr)
    return follow(job)


def follow(job: str) -> int:
    """Print each state change until the job leaves the queue; then where its run directory is."""
    last = None
    while True:
        state = subprocess.run(["squeue", "-h", "-j", job, "-o", "%T"], capture_output=True, text=True).stdout.strip()
        if not state:
            break
        if state != last:
            print(f"job {job}: {state}", file=sys.stderr)
            last = state
        time.sleep(POLL_S)
    print(f"job {job} left the queue; its output: runs/slurm-{job}.out, its run directory: runs/LAST", file=sys.stderr)
    return 0
