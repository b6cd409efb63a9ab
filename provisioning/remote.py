"""`make remote` on the laptop: its options checked before the first connection, then the one driver
(provisioning/drive.py: HOST= a group of one, HOSTS=/HOSTFILE= of several), or FETCH=<job-id>'s fetch of a
job left on the host, reported and archived as make remote would have.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from provisioning.cluster.addrs import master_port_arg, node_addrs_arg
from provisioning.cluster.nodes import ClusterError, cluster_hosts
from provisioning.drive import drive
from provisioning.group import NodeRunSettings
from provisioning.job import jobs
from provisioning.job.archive import check_destination
from provisioning.job.finish import report_and_archive
from provisioning.job.lifecycle import follow_and_fetch
from provisioning.session.hosts import parse_host
from provisioning.session.login import connect_for_transfers, host_key_record, resolve_base
from provisioning.session.options import RemoteOptions, nccl_env_arg, needs_gpu, truthy, validate_stages
from provisioning.session.steps import Steps


def remote_main(opts: RemoteOptions, stream=None) -> int:
    steps = Steps(stream)
    opts.runs_dir = Path(opts.runs_dir).resolve()  # printed paths are absolute: they are clicked on
    if opts.fetch_job:
        return fetch_main(opts, steps)
    opts.stages = validate_stages(opts.stages)
    needs_gpu(opts.profile)  # an unknown profile fails here, before any SSH
    return drive(opts, steps)


def fetch_main(opts: RemoteOptions, steps: Steps) -> int:
    """FETCH=<job-id>: bring back that job's run (following it first if it still runs), then
    report and archive it as `make remote` would have."""
    steps.begin("preflight", f"checking {opts.host.label} for job {opts.fetch_job}")
    remote = connect_for_transfers(opts)
    try:
        base = resolve_base(remote, opts.remote_dir)
        st = jobs.status(remote, base, log_offset=1 << 62, job_id=opts.fetch_job) if base else None
        if st is None or st.job is None:
            known = [j.job["job_id"] for j in jobs.every_job(remote, base) if j.job] if base else []
            steps.say(
                f"REFUSED: no job {opts.fetch_job} under {base or opts.remote_dir or 'cardtime'} on "
                f"{opts.host.label}; "
                f"jobs there: {', '.join(known) or 'none'}"
            )
            return 2
        record: dict[str, Any] = {
            "host": opts.host.label,
            "host_key": host_key_record(remote),
            "job": st.job,
            "commit": st.job.get("commit"),
            "profile": st.job.get("profile"),
            "stages": st.job.get("stages"),
            "runtime": st.job.get("runtime"),
            "reattached": True,
            "fetched_by_job_id": True,
        }
        remote, final, fetched = follow_and_fetch(remote, opts, base, opts.fetch_job, steps, record)
    finally:
        remote.close()
    return report_and_archive(opts, fetched.local_dir, record, final, steps)


def options(args):
    nodes = ()
    if args.command == "remote" and (args.hosts or args.hostfile):
        nodes = cluster_hosts(args.hosts, args.hostfile)
        if args.host:
            raise ClusterError(
                "HOST= and HOSTS=/HOSTFILE= both given: list every node, the first included, in HOSTS="
            )
        args.host = nodes[0].label
    kw = dict(
        host=parse_host(args.host),
        hosts=nodes,
        key=args.key or None,
        known_hosts=args.known_hosts or None,
        ssh_config=args.ssh_config or None,
        accept_new_host=truthy(args.accept_new_host),
        remote_dir=args.remote_dir,
    )
    if args.command in ("remote", "plan"):
        kw["nproc"] = nproc_arg(args.nproc)
    if args.command == "remote":
        check_run_settings(args)
        kw.update(
            profile=args.profile,
            stages=args.stages,
            tier=args.tier,
            burnin_min=args.burnin_min,
            runtime=args.runtime or None,
            image=args.image or None,
            cuda_line=args.cuda_line or None,
            archive=args.archive or None,
            endpoint_url=args.endpoint_url or None,
            allow_dirty=truthy(args.allow_dirty),
            new_run=truthy(args.new_run),
            detach=args.detach or None,
            runs_dir=args.runs_dir,
            fetch_exports=truthy(args.fetch_exports),
            fetch_job=args.fetch or None,
            nccl_env=nccl_env_arg(args.nccl_env),
        )
        if nodes:
            kw["nodes_run"] = node_run_settings(args)
    return RemoteOptions(**kw)


def check_run_settings(args) -> None:
    """Every setting of `make remote` that is not about logging in, refused here on the laptop before the
    first connection: a typo must not cost the preflight's minutes, nor surface after an hour of billed
    stages."""
    if args.cuda_line:
        from suite.hardware.cuda_lines import line_named

        line_named(args.cuda_line)
    if args.burnin_min:
        from suite.env_settings import minutes

        minutes(args.burnin_min)
    master_port_arg(args.master_port)
    check_destination(args.archive, args.endpoint_url)


def nproc_arg(text: str) -> int:
    """NPROC=: '' → 0 (one process per GPU); a positive number, else the error naming it."""
    if text and not text.isdigit() or text == "0":
        raise ValueError(f"NPROC={text!r} is not a number of processes per node (e.g. NPROC=8)")
    return int(text or 0)


def node_run_settings(args):
    """HOSTS='s settings for every node, each checked here on the laptop before any node is reached."""
    return NodeRunSettings(
        ssh_config=args.node_ssh_config,
        socket_ifname=args.socket_ifname,
        nproc=nproc_arg(args.nproc),
        node_addrs=node_addrs_arg(args.node_addrs, args.hostfile),
        master_port=master_port_arg(args.master_port),
    )
