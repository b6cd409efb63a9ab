"""`python -m provisioning slurm`'s flags (make slurm SLURM_HOST=… PARTITION=…) into SlurmOptions, then the
driver."""

from __future__ import annotations

import argparse
from pathlib import Path

from provisioning.slurm.driver import SlurmOptions, slurm_main
from suite.cluster.slurm_job import JOB_ID_RE


def add_parser(sub, add_connection_args) -> None:
    p = sub.add_parser(
        "slurm", help="submit the suite to a Slurm cluster through its login node and bring the run back"
    )
    add_connection_args(p)
    p.add_argument("--partition", default="", help="the partition to run in (required unless --fetch)")
    p.add_argument("--nodes", type=int, default=2)
    p.add_argument("--gpus-per-node", type=int, default=8, help="GPUs (and ranks) per node")
    p.add_argument("--account", default="")
    p.add_argument(
        "--time", default="", metavar="HH:MM:SS", help="the job's time limit (default: the partition's)"
    )
    p.add_argument("--profile", default="nccl-gpu")
    p.add_argument("--stages", default="")
    p.add_argument("--image", default="", help="pyxis: run every srun in this image (--container-image)")
    p.add_argument(
        "--cuda-line",
        default="",
        help="the venv's torch build (suite/hardware/cuda_lines.py; default the newest)",
    )
    p.add_argument(
        "--slurm-conf", default="", help="the login node's slurm.conf, where not /etc/slurm/slurm.conf"
    )
    p.add_argument("--socket-ifname", default="", help="the interface gloo/NCCL use between nodes (e.g. ib0)")
    p.add_argument("--nccl-env", default="", help="NCCL_ENV=: NCCL/libfabric settings for every rank")
    p.add_argument(
        "--node-addrs", default="", help="the nodes' addresses toward each other (default: slurmctld's)"
    )
    p.add_argument("--archive", default="")
    p.add_argument("--endpoint-url", default=None)
    p.add_argument("--allow-dirty", default="0")
    p.add_argument(
        "--new-run", default="0", help="1: submit even while a cardtime job of yours is in the queue"
    )
    p.add_argument(
        "--fetch",
        default="",
        metavar="JOB_ID",
        type=job_id_arg,
        help="follow (if it still runs), fetch, report and archive this Slurm job; submit nothing",
    )
    p.add_argument("--fetch-exports", default="0")
    p.add_argument("--runs-dir", type=Path, default=Path("runs"))
    p.set_defaults(func=cmd_slurm)


def job_id_arg(text: str) -> str:
    if text and not JOB_ID_RE.fullmatch(text):
        raise argparse.ArgumentTypeError(
            f"FETCH={text!r} is not a Slurm job id (make slurm printed it: 'job 4242')"
        )
    return text


def cmd_slurm(args) -> int:
    from provisioning.job.archive import check_destination
    from provisioning.session.hosts import parse_host
    from provisioning.session.options import truthy
    from suite.hardware.cuda_lines import line_named

    if args.cuda_line:
        line_named(args.cuda_line)  # an unknown line is refused here, before any SSH
    check_destination(args.archive, args.endpoint_url)
    from provisioning.session.options import nccl_env_arg

    nccl_env = nccl_env_arg(args.nccl_env)  # read and checked before any SSH
    opts = SlurmOptions(
        host=parse_host(args.host),
        key=args.key or None,
        known_hosts=args.known_hosts or None,
        ssh_config=args.ssh_config or None,
        accept_new_host=truthy(args.accept_new_host),
        remote_dir=args.remote_dir,
        profile=args.profile,
        stages=args.stages,
        cuda_line=args.cuda_line or None,
        archive=args.archive or None,
        endpoint_url=args.endpoint_url or None,
        allow_dirty=truthy(args.allow_dirty),
        new_run=truthy(args.new_run),
        runs_dir=args.runs_dir,
        fetch_exports=truthy(args.fetch_exports),
        fetch_job=args.fetch or None,
        partition=args.partition,
        nodes=args.nodes,
        gpus_per_node=args.gpus_per_node,
        account=args.account,
        time_limit=args.time,
        container_image=args.image,
        slurm_conf=args.slurm_conf,
        socket_ifname=args.socket_ifname,
        node_addrs=args.node_addrs,
        nccl_env=nccl_env,
    )
    return slurm_main(opts)
