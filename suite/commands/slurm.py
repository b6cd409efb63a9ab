"""python -m suite slurm: write the batch script for a Slurm cluster (suite/cluster/slurm.py) and, with
--submit, submit it, follow the job (suite/cluster/slurm_job.py: its state, its output's new lines) and end in
the run's report.

    python -m suite slurm --partition gpu --nodes 2 --gpus-per-node 8 --submit     # on the login node
    python -m suite slurm --attach 4242                                          # follow (again) job 4242

Before anything is submitted: refused in one line without sbatch, with a partition sinfo does not know, or
with more nodes than the partition has. --no-follow prints the job id on stdout and returns (make slurm
SLURM_HOST=… follows from the laptop instead).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

from suite import run_env, stages
from suite.cluster.slurm import job_files, partition_nodes_argv, sbatch_script, submission_problem
from suite.cluster.slurm_job import JOB_ID_RE, follow, parse_poll, status_command
from suite.commands import _numbers as numbers
from suite.commands import usage_error
from suite.config import PROFILES
from suite.runfiles import atomic_write_text

POLL_S = 3.0  # scontrol once per 3 s: light on the controller, a job's end seen within seconds


def add_parser(sub) -> None:
    p = sub.add_parser(
        "slurm", help="write (and --submit) the sbatch script running the suite across NODES nodes"
    )
    p.add_argument("--partition", default="", help="the partition to run in (required unless --attach)")
    p.add_argument("--nodes", type=numbers.count, default=2, help="nodes to allocate (default 2)")
    p.add_argument(
        "--gpus-per-node", type=numbers.count, default=8, help="GPUs (and ranks) per node (default 8)"
    )
    p.add_argument("--account", default="", help="the account to charge, where the cluster asks for one")
    p.add_argument(
        "--time", default="", metavar="HH:MM:SS", help="the job's time limit (default: the partition's)"
    )
    p.add_argument("--profile", default="nccl-gpu", choices=sorted(PROFILES))
    p.add_argument("--stages", default="", metavar="A,B", help="only these stages (default: all)")
    p.add_argument("--container-image", default="", help="pyxis: run every srun in this image")
    p.add_argument(
        "--socket-ifname", default="", help="the interface gloo/NCCL use between nodes (e.g. ens5)"
    )
    p.add_argument(
        "--node-addrs",
        default="",
        metavar="A,B",
        help="the nodes' addresses toward each other, in the allocation's order (default: slurmctld's "
        "NodeAddr)",
    )
    p.add_argument(
        "--out", type=Path, default=Path("runs"), help="the run directories' folder, on shared storage"
    )
    p.add_argument(
        "--env-file",
        type=Path,
        metavar="FILE",
        help="NCCL/libfabric/UCX/CUDA settings, NAME=value a line (suite/run_env.py): copied beside the "
        "batch script, on shared storage, and given to `suite run`",
    )
    p.add_argument("--submit", action="store_true", help="sbatch the script and follow the job")
    p.add_argument("--no-follow", action="store_true", help="with --submit: print the job id and return")
    p.add_argument(
        "--attach", default="", metavar="JOB_ID", help="follow this job (submitted before) to its report"
    )
    p.set_defaults(func=main)


def main(args) -> int:
    if args.attach:
        if not JOB_ID_RE.fullmatch(args.attach):
            return usage_error(
                f"--attach {args.attach!r} is not a Slurm job id (squeue -u $USER lists yours)"
            )
        return follow_to_report(args.attach, args.out, tail_only=True)
    if not args.partition:
        return usage_error("no partition: make slurm PARTITION=… (`sinfo -s` lists them)")
    script = args.out / f"cardtime-{datetime.now(timezone.utc):%Y%m%dT%H%M%SZ}.sbatch"
    settings_file = script.with_suffix(".nccl.env")
    try:
        settings = run_env.read(args.env_file) if args.env_file else {}
        selected = ",".join(stages.select(args.stages)) if args.stages else ""
        text = sbatch_script(
            checkout=str(Path.cwd()),
            python=sys.executable,
            nodes=args.nodes,
            gpus_per_node=args.gpus_per_node,
            partition=args.partition,
            account=args.account,
            profile=args.profile,
            stages=selected,
            out=str(args.out.resolve()),
            time_limit=args.time,
            container_image=args.container_image,
            gpus=PROFILES[args.profile].device == "cuda",
            socket_ifname=args.socket_ifname,
            node_addrs=args.node_addrs,
            env_file=str(settings_file.resolve()) if settings else "",
        )
    except (stages.StageSelectionError, ValueError) as e:
        return usage_error(str(e))
    if args.submit:
        problem = login_node_problem(args.partition, args.nodes)
        if problem:
            return usage_error(problem)
    try:
        args.out.mkdir(parents=True, exist_ok=True)  # slurmd opens the job's --output there
        if settings:  # where every node reads it: --out is on shared storage
            atomic_write_text(settings_file, run_env.text_of(settings))
        atomic_write_text(script, text)
    except OSError as e:  # --out names a file or a FIFO, a folder not writable: one line, not a traceback
        return usage_error(
            f"cannot write the batch script under {args.out}: {e.strerror or e}; pass --out DIR"
        )
    print(f"batch script: {script}", file=sys.stderr)
    if not args.submit:
        return 0
    done = subprocess.run(["sbatch", "--parsable", str(script)], capture_output=True, text=True)
    if done.returncode != 0:
        return usage_error(
            f"sbatch refused the script: {done.stderr.strip().splitlines()[-1:] or done.returncode}"
        )
    job = done.stdout.strip().split(";")[0]
    if args.no_follow:
        print(job)
        return 0
    print(
        f"submitted job {job}; following it (Ctrl-C leaves it running: `make slurm FETCH={job}` comes back)",
        file=sys.stderr,
    )
    return follow_to_report(job, args.out)


def login_node_problem(partition: str, nodes: int) -> str | None:
    sbatch = shutil.which("sbatch") or ""
    if not sbatch:
        return submission_problem(sbatch="", partition=partition, nodes=nodes, sinfo_nodes="")
    listed = subprocess.run(partition_nodes_argv(partition), capture_output=True, text=True)
    error = (
        (listed.stderr.strip().splitlines() or [f"exit {listed.returncode}"])[-1] if listed.returncode else ""
    )
    return submission_problem(
        sbatch=sbatch, partition=partition, nodes=nodes, sinfo_nodes=listed.stdout, sinfo_error=error
    )


def follow_to_report(job: str, out: Path, tail_only: bool = False) -> int:
    """Follow the job here on the login node to its end, then render its run's report: the run's exit status
    (0, 1 a fail verdict), 2 when the job left no run directory or the report could not be rendered."""

    def poll(offset: int):
        return parse_poll(
            subprocess.run(
                ["sh", "-c", status_command(job, str(out.resolve()), offset)], capture_output=True, text=True
            ).stdout
        )

    say = lambda text: print(text, file=sys.stderr, flush=True)  # noqa: E731
    final = follow(poll, job, say, POLL_S, tail_only=tail_only)
    if not final.run_dir:
        output = job_files(str(out), job)["out"]
        return usage_error(f"job {job} ended ({final.describe()}) without a run directory: read {output}")
    (out / "LAST").write_text(final.run_dir + "\n")
    report = subprocess.run([sys.executable, "-m", "reports", final.run_dir])
    say(f"run directory: {final.run_dir}")
    if report.returncode != 0:
        say(
            f"report FAILED (exit {report.returncode}): rerun `make report RUN={final.run_dir}` after fixing "
            f"the above"
        )
        return 2
    say(f"report: {Path(final.run_dir) / 'report.html'}")
    return final.exit_code if final.exit_code in (0, 1) else 2
