"""python -m suite run: run the stages into a run directory (or --list them, or --resume one)."""

from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path

from suite import env_settings, run_env, run_lock, stages
from suite.cluster.multinode import NodesError, hostfile_nodes, nodes_from_slurm, parse_nodes
from suite.commands import _numbers as numbers
from suite.commands import record_last, record_last_problem, usage_error
from suite.config import LAUNCHERS, PROFILES, ProfileError, get_profile
from suite.fromjson import FieldTypeError
from suite.regular_files import not_regular_problem
from suite.results import RunDirError
from suite.verdicts import failed_stages


def add_parser(sub) -> None:
    p = sub.add_parser("run", help="run the stages in the checklist's order into runs/<run-id>/")
    p.add_argument(
        "--profile",
        default=None,
        metavar="|".join(sorted(PROFILES)),
        help="gloo-cpu: the CPU rehearsal; nccl-gpu: one process per GPU; nccl-1gpu: one process on one "
        "CUDA card (default gloo-cpu)",
    )
    p.add_argument(
        "--stages", metavar="A,B", help="only these stages, e.g. topology,bandwidth (default: all)"
    )
    p.add_argument("--list", action="store_true", help="list the stages in order and exit")
    p.add_argument(
        "--tier",
        choices=("quick", "standard", "soak"),
        help="a time-boxed run (suite/plan/tiers.py): quick (health, topology, bandwidth, 2-min burn-in), "
        "standard "
        "(every stage, 10-min burn-in), soak (1-hour burn-in; BURNIN_MIN= for another)",
    )
    p.add_argument(
        "--burnin-min",
        type=burnin_minutes,
        metavar="MIN",
        help="with --tier: the burn-in's minutes (default: the tier's, or BURNIN_MIN from the environment)",
    )
    p.add_argument(
        "--recheck",
        type=Path,
        metavar="RUN_DIR",
        help="a new run of only the stages that failed (or did not complete) in RUN_DIR: the repaired box",
    )
    p.add_argument(
        "--out",
        type=Path,
        default=Path("runs"),
        metavar="DIR",
        help="folder for new run directories (default runs/)",
    )
    p.add_argument(
        "--resume",
        type=Path,
        metavar="RUN_DIR",
        help="continue this run: complete stages are kept, the others run",
    )
    p.add_argument(
        "--nproc",
        type=numbers.count,
        help="processes per node (default: the profile's; on a GPU box, its GPU count)",
    )
    p.add_argument(
        "--stage-timeout",
        metavar="SECONDS|STAGE=SECONDS,…",
        help="override stage timeouts: one number for every stage, or per stage (e.g. fault=120,tp=60)",
    )
    p.add_argument(
        "--master-port", type=numbers.port, help="fixed rendezvous port (default: a free one per launch)"
    )
    p.add_argument(
        "--keep-going",
        action="store_true",
        help="run the GPU stages even when topology finds fewer usable GPUs than the profile needs",
    )
    p.add_argument(
        "--nodes",
        metavar="A,B",
        help="a multi-node run: the nodes as [user@]host[:port], this node first "
        "(each reached by ssh; default inside a Slurm allocation: its nodes)",
    )
    p.add_argument("--hostfile", type=Path, metavar="FILE", help="the nodes one a line instead of --nodes")
    p.add_argument(
        "--ssh-config", default="", metavar="FILE", help="the ssh_config the other nodes are reached with"
    )
    p.add_argument(
        "--node-addrs",
        default="",
        metavar="A,B",
        help="each node's address toward the other nodes, in --nodes' order (default: asked of the "
        "nodes; a hostfile's addr= column)",
    )
    p.add_argument(
        "--socket-ifname",
        default="",
        metavar="IF",
        help="the network interface gloo and NCCL use between nodes (e.g. ens5)",
    )
    p.add_argument(
        "--launcher",
        choices=LAUNCHERS,
        help="how the ranks start: torchrun (one launch per stage, as users launch; nccl-gpu's only way) "
        "or fork (forked from one warm process: gloo-cpu's default); also on --resume",
    )
    p.add_argument("--record-last", type=Path, metavar="FILE", help="write the run directory's path to FILE")
    p.add_argument(
        "--env-file",
        type=Path,
        metavar="FILE",
        help="NCCL/libfabric/UCX/CUDA settings, one NAME=value a line, given to every rank on every node and "
        "recorded in the manifest (suite/run_env.py)",
    )
    p.set_defaults(func=main)


def gpus_listed() -> int:
    """The GPUs `nvidia-smi -L` lists here (0 without the tool or a driver), read without importing torch."""
    import shutil
    import subprocess

    if shutil.which("nvidia-smi") is None:
        return 0
    try:
        listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return 0
    return (
        sum(line.startswith("GPU ") for line in listed.stdout.splitlines()) if listed.returncode == 0 else 0
    )


def burnin_minutes(text: str) -> float:
    try:
        return env_settings.minutes(text, "--burnin-min")
    except env_settings.SettingError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def list_stages(profile: str | None = None) -> int:
    print(f"{'#':>2}  {'stage':<10} {'rehearsal':<9} measures")
    for name in stages.available(profile):
        declared = stages.declaration(name)
        face = "yes" if declared.rehearsal else "no"
        print(f"{declared.row:>2}  {name:<10} {face:<9} {declared.measures}")
        if declared.rehearsal:
            print(f"{'':>2}  {'':<10} {'':<9} on CPU: {declared.rehearsal}")
    return 0


def parse_timeouts(spec: str | None) -> dict[str, float]:
    """'30' → {'*': 30.0}; 'fault=120,tp=60' → per stage. Raises ValueError naming the bad part."""
    if not spec:
        return {}
    out: dict[str, float] = {}
    for part in spec.split(","):
        stage, sep, seconds = part.rpartition("=")
        key = stage.strip() if sep else "*"
        if sep and key not in stages.ORDER:
            raise ValueError(f"--stage-timeout: {key!r} is not a stage (one of {', '.join(stages.ORDER)})")
        try:
            value = float(seconds)
        except ValueError:
            raise ValueError(f"--stage-timeout: {part!r} is not SECONDS or STAGE=SECONDS") from None
        if not math.isfinite(value) or value <= 0:  # NaN compares false with everything: no limit at all
            raise ValueError(f"--stage-timeout: {part!r} must be a positive number of seconds")
        out[key] = value
    return out


def apply_timeouts(profile, timeouts: dict[str, float]):
    """A single number replaces every stage's limit; STAGE=SECONDS entries then override single stages."""
    timeouts = dict(timeouts)
    uniform = timeouts.pop("*", None)
    per_stage = {} if uniform is not None else dict(profile.stage_timeouts_s)
    per_stage.update(timeouts)
    return profile.with_overrides(
        stage_timeout_s=uniform or profile.stage_timeout_s, stage_timeouts_s=tuple(sorted(per_stage.items()))
    )


def with_nodes(profile, args):
    """The profile across --nodes / --hostfile, or the Slurm allocation's nodes; unchanged on one node."""
    if args.nodes and args.hostfile:
        raise NodesError("--nodes and --hostfile both name the nodes: pass one")
    if args.hostfile:
        if problem := not_regular_problem(args.hostfile):  # a FIFO would block the read, a folder is no list
            raise NodesError(f"--hostfile {args.hostfile}: {problem}")
        if not args.hostfile.is_file():
            raise NodesError(
                f"--hostfile {args.hostfile}: no such file: write one node a line (user@host[:port])"
            )
        entries = hostfile_nodes(args.hostfile.read_bytes(), str(args.hostfile))
    elif args.nodes:
        entries = tuple(e.strip() for e in args.nodes.split(","))
    else:  # inside a Slurm allocation: its nodes, reached with srun
        entries = nodes_from_slurm(os.environ)
    parse_nodes(entries or ["localhost"])
    if len(entries) < 2:
        return profile
    launcher = "ssh" if (args.nodes or args.hostfile) else "srun"
    if launcher == "ssh":
        from suite.cluster.nodecheck import check_nodes

        # Before any stage, one line naming the node: the port, ssh to every node, the GPU counts.
        check_nodes(
            parse_nodes(entries),
            args.ssh_config,
            gpus=profile.device == "cuda",
            master_port=profile.master_port,
        )
        profile = with_node_network(profile, parse_nodes(entries), args)
    else:  # the node addresses (NODE_ADDRS=, else slurmctld's) and the rendezvous port tried through srun
        import shlex

        from suite.cluster.slurm import SRUN_ARGS_ENV
        from suite.cluster.slurm_network import slurm_network

        addrs, port = slurm_network(
            parse_nodes(entries),
            args.node_addrs.split(",") if args.node_addrs else (),
            profile.master_port,
            shlex.split(os.environ.get(SRUN_ARGS_ENV, "")),
        )
        profile = profile.with_overrides(node_addrs=addrs, master_port=port)
    return profile.with_overrides(
        nodes=tuple(entries),
        ssh_config=args.ssh_config,
        socket_ifname=args.socket_ifname,
        node_launcher=launcher,
    )


def tier_and_recheck(profile, selected: list[str], args):
    """--tier's burn-in and stages (within --stages when both are given), then --recheck's failed stages."""
    from suite.plan import tiers

    if args.tier:
        environ = {**os.environ, **({"BURNIN_MIN": str(args.burnin_min)} if args.burnin_min else {})}
        profile, chosen = tiers.apply(profile, args.tier, environ)
        selected = [s for s in selected if s in chosen] if args.stages else chosen
    if args.recheck:
        failed = tiers.failed_stages(args.recheck)
        if not failed:
            raise ValueError(f"--recheck {args.recheck}: nothing failed there; nothing to recheck")
        selected = [s for s in stages.available(profile.name) if s in failed]
    return profile, selected


def with_node_network(profile, nodes, args):
    """The node addresses (given, from the hostfile's addr= column, or asked of the nodes) and the fixed
    rendezvous port, every connection the run needs tried from every node (suite/cluster/node_ports.py)."""
    from suite.cluster.node_addrs import hostfile_node_addrs, node_addrs_for, rendezvous_port
    from suite.cluster.node_ports import check_node_network

    given = (
        args.node_addrs.split(",")
        if args.node_addrs
        else (hostfile_node_addrs(args.hostfile.read_text()) if args.hostfile else ())
    )
    from suite.cluster.mpirun_reach import check_mpirun_reach

    addrs = node_addrs_for(nodes, given, args.ssh_config)
    port = rendezvous_port(profile.master_port)
    check_node_network(nodes, addrs, port, args.ssh_config)
    check_mpirun_reach(nodes, addrs, args.ssh_config)  # nccl-tests' daemons: ssh to the node addresses
    return profile.with_overrides(node_addrs=addrs, master_port=port)


def main(args) -> int:
    from suite import runner

    if args.profile is None:  # the rehearsal; on a GPU box said so, with the profile that tests its GPUs
        args.profile = "gloo-cpu"
        if not args.list and not args.resume and (gpus := gpus_listed()):
            print(
                f"note: this machine lists {gpus} GPU(s) (nvidia-smi -L); running the CPU rehearsal "
                f"(gloo-cpu): "
                f"--profile {'nccl-1gpu' if gpus == 1 else 'nccl-gpu'} tests the GPUs",
                file=sys.stderr,
            )
    if args.profile not in PROFILES:  # one line (make rehearse PROFILE=…), not argparse's usage block
        return usage_error(
            f"PROFILE={args.profile!r} is no profile: choose from {', '.join(sorted(PROFILES))}"
        )
    if args.list:
        return list_stages(args.profile)
    produce = None  # a resumed ingest: its stages' rows from the kept captures (suite/ingest/resume.py)
    settings: dict[str, str] = {}  # --env-file's
    try:
        timeouts = parse_timeouts(args.stage_timeout)
        if args.record_last and (problem := record_last_problem(args.record_last)):
            # before any stage: a FIFO would block the last step
            return usage_error(f"--record-last: {problem}")
        if args.resume:
            if args.stages:
                return usage_error("--resume continues the run's own stage selection: drop --stages")
            if args.env_file:
                return usage_error(
                    "--resume sets the run's recorded --env-file settings again: drop --env-file"
                )
            if args.recheck or args.tier:
                return usage_error(
                    f"--resume continues {args.resume} as it was started; --recheck and --tier start "
                    "a new run: pass one or the other"
                )
            # before reading it: the manifest may be mid-rewrite by the run holding it
            if args.resume.is_dir():
                run_lock.hold(args.resume)
            try:
                run, profile = runner.resume_run(args.resume)
            except (FieldTypeError, ProfileError, TypeError) as e:  # a recorded profile of the wrong types
                raise RunDirError(
                    args.resume / "manifest.json", f"its profile cannot be rebuilt: {e}"
                ) from None
            os.environ.update(run_env.recorded(run.manifest))  # the --env-file settings it started with
            # its stages read captures: run here, they would measure this machine
            if run.manifest.get("ingested"):
                from suite.ingest import resume

                produce = resume.producers(run)
        else:
            settings = run_env.read(args.env_file) if args.env_file else {}
            os.environ.update(settings)  # before the nodes are checked: every launch from here inherits them
            profile = get_profile(args.profile, args.nproc)
            if args.master_port:
                profile = profile.with_overrides(master_port=args.master_port)
            profile = with_nodes(profile, args)
            selected = stages.select(args.stages, profile.name)
            profile, selected = tier_and_recheck(profile, selected, args)
        if timeouts:
            profile = apply_timeouts(profile, timeouts)
        if args.launcher:
            profile = profile.with_overrides(launcher=args.launcher)
        if not args.resume:
            run = runner.start_run(profile, selected, args.out)
            run_lock.hold(run.path)  # a --resume of this directory from elsewhere waits for this run to end
            if settings:
                run.manifest[run_env.MANIFEST_KEY] = {"path": str(args.env_file), "vars": settings}
                run.save_manifest()
    # NodesError too
    except (
        ProfileError,
        stages.StageSelectionError,
        RunDirError,
        OSError,
        ValueError,
        run_lock.RunLockedError,
    ) as e:
        return usage_error(str(e))
    try:
        record_last(args.record_last, run.path)
    except OSError as e:
        return usage_error(f"--record-last: {e}")
    try:
        outcome = runner.execute(run, profile, keep_going=args.keep_going, produce=produce)
    except OSError as e:  # a full disk, a folder gone: the stages complete so far are kept, --resume goes on
        where = e.filename or run.path
        return usage_error(
            f"{where}: {e.strerror or e}; free space (or fix the folder), then "
            f"python -m suite run --resume {run.path}"
        )
    print(f"run directory: {run.path}", file=sys.stderr)
    print(f"summary: {outcome.summary()} in {outcome.seconds:.1f} s", file=sys.stderr)
    from suite.box_verdict import REHEARSAL, box_verdict
    from suite.next_steps import AFTER_REHEARSAL

    box = box_verdict(run.manifest, run.verdicts())
    print(f"box verdict: {box.line()}", file=sys.stderr)
    failed = sorted(failed_stages(run.manifest, run.verdicts()))
    if box.rejected or failed:  # the evidence for the provider's ticket, made while the box is still held
        from suite.commands.bundle import describe
        from suite.forensics.bundle import make_bundle

        why = "REJECT" if box.rejected else "stage failed: " + ", ".join(failed)
        print(describe(make_bundle(run.path, reason=why)), file=sys.stderr)
    if box.word == REHEARSAL and not box.rejected:
        print(f"next: {AFTER_REHEARSAL}", file=sys.stderr)
    return outcome.exit_code
