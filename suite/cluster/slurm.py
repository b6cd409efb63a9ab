"""Slurm: the batch script `make slurm` submits, and the srun line a launch inside an allocation uses. Pure
text.

    python -m suite slurm --partition gpu --nodes 2 --gpus-per-node 8 [--account A] [--submit]

The script runs `python -m suite run` once, on the allocation's first node (the batch host, the first of
`scontrol show hostnames "$SLURM_JOB_NODELIST"`): the suite sees SLURM_JOB_NODELIST, takes the allocation's
nodes (suite/cluster/multinode.py's nodes_from_slurm), and starts each torchrun launch as ONE srun across them
— one task per node, each a torchrun joining the c10d rendezvous at that first node — instead of ssh. So a
stage is as many sruns as it has launches (most have one). Each node's torchrun log goes to
raw/<stage>/<node>/ (srun's %N), the ranks' logs beside it; the run directory is on the cluster's shared
storage, where every node writes. With pyxis, CARDTIME_SRUN_ARGS carries `--container-image` to every srun.
"""

from __future__ import annotations

import shlex
from typing import Sequence

from suite.cluster.sbatch_values import sbatch_value_problem

SRUN_ARGS_ENV = "CARDTIME_SRUN_ARGS"  # extra words for every srun (pyxis's --container-image …)
JOB_NAME = "cardtime"  # every job make slurm submits: how the user's own queued ones are found again

IS_HOST_MARK = "@CARDTIME_IS_HOST@"  # in the one argv of every node: 1 on the store's host, 0 elsewhere
NODE_ADDR_MARK = (
    "@CARDTIME_NODE_ADDR@"  # … the node's own node-to-node address (suite/cluster/slurm_network.py)
)

# srun runs this on each node ($0 the raw folder, $1 the plan: `name=address,…`, the first the store's host;
# '' for a probe): the node's own raw folder and name, then the marks in the command replaced by what this
# node is — torch would otherwise guess the host by matching the endpoint against the node's names, which a
# second address defeats.
# a launch's log opens with the node's own command
_NODE_SETUP = (
    'node=${SLURMD_NODENAME:-$(hostname)}; export CARDTIME_RAW_DIR="$0/$node" CARDTIME_NODE_NAME="$node"; '
    'mkdir -p "$CARDTIME_RAW_DIR"; plan=$1; shift; is_host=0; addr=$node; first=1; '
    'for pair in $(printf %s "$plan" | tr , " "); do '
    'if [ "${pair%%=*}" = "$node" ]; then addr=${pair#*=}; is_host=$first; fi; first=0; done; '
    'n=$#; while [ "$n" -gt 0 ]; do a=$1; shift; n=$((n - 1)); case $a in '
    f'*{IS_HOST_MARK}) a="${{a%{IS_HOST_MARK}}}$is_host";; '
    f'*{NODE_ADDR_MARK}) a="${{a%{NODE_ADDR_MARK}}}$addr";; esac; set -- "$@" "$a"; done; '
    '[ -z "$plan" ] || printf "$ %s\\n" "$*"; '
)
_PER_NODE = _NODE_SETUP + 'exec "$@"'


# An elastic launch's ($1 first: the expendable nodes, a,b): the node's torchrun not exec'd, so that an
# expendable node whose torchrun is lost (the node-loss drill kills it) ends its task with 0 and the step's
# exit is the survivors'.
_PER_NODE_ELASTIC = (
    'lose=",$1,"; shift; ' + _NODE_SETUP + '"$@"; rc=$?; case "$lose" in *",$node,"*) exit 0;; esac; exit $rc'
)


def srun_launch_command(
    nnodes: int,
    raw_dir: str,
    log_name: str,
    torchrun_argv: Sequence[str],
    extra_srun_args: Sequence[str] = (),
    elastic: bool = False,
    expendable: Sequence[str] = (),
    plan: str = "",
) -> list[str]:
    """One srun over the allocation's nodes: a task per node, its output in raw_dir/<node>/log_name, a failed
    node ending the others (--kill-on-bad-exit=1), the suite's environment passed on (--export=ALL). elastic
    (`--nnodes=MIN:N`): a failed node must NOT end the others (--kill-on-bad-exit=0: the survivors restart
    without it), and an `expendable` node's loss is not the step's failure. plan (slurm_network.node_plan):
    what each node puts for IS_HOST_MARK and NODE_ADDR_MARK in the argv."""
    head = [
        "srun",
        f"--nodes={nnodes}",
        f"--ntasks={nnodes}",
        "--ntasks-per-node=1",
        f"--kill-on-bad-exit={0 if elastic else 1}",
        "--export=ALL",
        f"--output={raw_dir}/%N/{log_name}",
        *extra_srun_args,
        "sh",
        "-c",
    ]
    if not elastic:
        return [*head, _PER_NODE, raw_dir, plan, *torchrun_argv]
    return [*head, _PER_NODE_ELASTIC, raw_dir, ",".join(expendable), plan, *torchrun_argv]


# srun runs this on each node: the GPU check (provisioning/cuda_check_host.py) naming the node it ran on.
_CHECK_ON_NODE = 'exec "$@" --where "node ${SLURMD_NODENAME:-$(hostname)}\'s python ($1)"'


def gpu_check_lines(checkout: str, python: str, gpus_per_node: int, in_container: bool) -> str:
    """The batch script's lines before the run, on a GPU profile: on every node at once (one srun task each,
    in the image with pyxis), torch must see the node's GPUS_PER_NODE GPUs, else the job ends with exit 2
    before any stage, the refusing node's line in its output (`cardtime GPU check REFUSED: …`), as make
    remote's set-up does."""
    from suite.hardware.cuda_lines import LINES

    check = [
        "python" if in_container else python,
        f"{checkout}/provisioning/cuda_check_host.py",
        "--gpus",
        str(gpus_per_node),
        "--driver",
        "",
    ]
    for line in LINES:  # each CUDA line's oldest driver, for the refusal's advice
        check += ["--min-driver", f"{line.major}={line.min_driver_text}"]
    srun = (
        'srun --nodes="$SLURM_JOB_NUM_NODES" --ntasks-per-node=1 --kill-on-bad-exit=0 --export=ALL '
        f"${{{SRUN_ARGS_ENV}:-}} sh -c {shlex.quote(_CHECK_ON_NODE)} sh {shlex.join(check)}"
    )
    return (
        'echo "── GPU check on every node: does torch see its GPUs?"\n'
        f"{srun} || status=2\n"
        'if [ "$status" -ne 0 ]; then\n'
        '  echo "cardtime: the GPU check REFUSED on a node (its line above): no stage ran"\n'
        "fi\n"
    )


def sbatch_script(
    *,
    checkout: str,
    python: str,
    nodes: int,
    gpus_per_node: int,
    partition: str,
    account: str = "",
    profile: str = "nccl-gpu",
    stages: str = "",
    out: str = "runs",
    time_limit: str = "",
    container_image: str = "",
    job_name: str = JOB_NAME,
    gpus: bool = True,
    socket_ifname: str = "",
    node_addrs: str = "",
    env_file: str = "",
) -> str:
    """The batch script: the allocation asked for, the rendezvous host named, the suite run once on it, its
    run directory and exit status left beside the job's output (job_files) for whoever follows the job.
    gpus=False (a CPU profile): no --gpus-per-node, which a cluster without GPU gres refuses."""

    def opt(name: str, value) -> str:
        return f"#SBATCH --{name}={value}\n" if value not in ("", None) else ""

    if nodes < 1 or gpus_per_node < 1:
        raise ValueError(f"NODES={nodes} GPUS_PER_NODE={gpus_per_node}: both must be at least 1")
    problem = sbatch_value_problem(
        partition=partition,
        account=account,
        time_limit=time_limit,
        container_image=container_image,
        socket_ifname=socket_ifname,
        node_addrs=node_addrs,
        runs_folder=out,
    )
    if problem:
        raise ValueError(problem)
    if node_addrs and len(node_addrs.split(",")) != nodes:
        raise ValueError(
            f"NODE_ADDRS= names {len(node_addrs.split(','))} addresses for NODES={nodes}: give one per "
            "node, in the allocation's order (`scontrol show hostnames` of its node list)"
        )
    run = [python, "-m", "suite", "run", "--profile", profile, "--nproc", str(gpus_per_node), "--out", out]
    run += (["--stages", stages] if stages else []) + (
        ["--socket-ifname", socket_ifname] if socket_ifname else []
    )
    run += ["--node-addrs", node_addrs] if node_addrs else []
    run += ["--env-file", env_file] if env_file else []  # NCCL_ENV=: the run sets them before any srun
    # The job's own files, named by the id Slurm gives it (the script is written before there is one).
    last, exit_file = (shlex.quote(out) + f'"/slurm-${{SLURM_JOB_ID}}.{kind}"' for kind in ("last", "exit"))
    container = ""
    if container_image:
        from suite.cluster.slurm_pyxis import container_srun_args

        words = container_srun_args(container_image, checkout, out)
        container = f'export {SRUN_ARGS_ENV}="{words}"  # pyxis: every srun in the image\n'
    return (
        "#!/bin/bash\n"
        + opt("job-name", job_name)
        + opt("nodes", nodes)
        + opt("ntasks-per-node", 1)
        + (opt("gpus-per-node", gpus_per_node) if gpus else "")
        + "#SBATCH --exclusive\n"
        + opt("partition", partition)
        + opt("account", account)
        + opt("time", time_limit)
        + opt("output", f"{out}/slurm-%j.out")
        + "set -euo pipefail\n"
        + f"cd {shlex.quote(checkout)}\n"
        + 'head=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | sed -n 1p)  # sed reads all: no SIGPIPE '
        "under pipefail\n"
        + 'echo "cardtime: $SLURM_JOB_NUM_NODES nodes ($SLURM_JOB_NODELIST), rendezvous at $head"\n'
        + container
        + f"export PYTHONPATH={shlex.quote(checkout)}${{PYTHONPATH:+:$PYTHONPATH}}  # the checkout's code in "
        f"every worker\n"
        + "status=0\n"
        + (gpu_check_lines(checkout, python, gpus_per_node, bool(container_image)) if gpus else "")
        + f'[ "$status" -ne 0 ] || {shlex.join(run)} --record-last {last} || status=$?\n'
        + f'echo "$status" > {exit_file}\n'
        + 'exit "$status"\n'
    )


def job_files(out: str, job: str) -> dict[str, str]:
    """Where a job of sbatch_script leaves its output, its run directory's path and its exit status."""
    return {kind: f"{out}/slurm-{job}.{kind}" for kind in ("out", "last", "exit")}


def partition_nodes_argv(partition: str) -> list[str]:
    """sinfo's one line per node of the partition (a node in several states is listed once per state)."""
    return ["sinfo", "-h", "-N", "-p", partition, "-o", "%N"]


# sh: squeue's line per job of the login's user named JOB_NAME, `<id> <state>`.
OWN_JOBS = 'squeue -h -u "$(id -un)" -n ' + JOB_NAME + " -o '%i %T'"


def queued_problem(own_jobs: str, host_flag: str) -> str | None:
    """A job of ours still queued or running (OWN_JOBS's output): rerunning make slurm after a dropped laptop
    must come back to it, not submit a second one. `host_flag`: the SLURM_HOST=… words of the command to
    suggest."""
    jobs = [line.split() for line in own_jobs.splitlines() if len(line.split()) == 2]
    if not jobs:
        return None
    listed = ", ".join(f"{j} ({state})" for j, state in jobs[:5])
    return (
        f"your cardtime job {listed} is still in the queue: make slurm {host_flag}FETCH={jobs[-1][0]} "
        f"follows it "
        "to its report; NEW_RUN=1 submits another anyway"
    )


def submission_problem(
    *, sbatch: str, partition: str, nodes: int, sinfo_nodes: str, sinfo_error: str = ""
) -> str | None:
    """Why the job must not be submitted, in one line, or None. `sbatch`: its path on the login node ('' if
    absent); `sinfo_nodes`: partition_nodes_argv's output there; `sinfo_error`: its error's last line, where
    it failed."""
    if not sbatch:
        return (
            "no sbatch on the login node: run make slurm on the cluster's login node, or give "
            "SLURM_HOST=user@login"
        )
    if sinfo_error:
        return (
            f"sinfo failed on the login node ({sinfo_error}): is slurmctld up? SLURM_CONF= names another "
            f"slurm.conf"
        )
    names = sorted(set(sinfo_nodes.split()))
    if not names:
        return (
            f"PARTITION={partition} is unknown to Slurm there (`sinfo -h -p {partition}` lists no node): "
            "`sinfo -s` lists the partitions"
        )
    if nodes > len(names):
        return (
            f"NODES={nodes} but PARTITION={partition} has {len(names)} node(s) ({', '.join(names[:8])}"
            f"{' …' if len(names) > 8 else ''}): ask for NODES={len(names)} at most, or another partition"
        )
    return None
