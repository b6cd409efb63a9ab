"""Slurm: the batch script `make slurm` submits, and the srun line a launch inside an allocation uses. Pure text.

    python -m suite slurm --partition gpu --nodes 2 --gpus-per-node 8 [--account A] [--submit]

The script runs `python -m suite run` once, on the allocation's first node (the batch host, the first of
`scontrol show hostnames "$SLURM_JOB_NODELIST"`): the suite sees SLURM_JOB_NODELIST, takes the allocation's
nodes (suite/multinode.py's nodes_from_slurm), and starts each torchrun launch as ONE srun across them —
one task per node, each a torchrun joining the c10d rendezvous at that first node — instead of ssh. So a
stage is as many sruns as it has launches (most have one). Each node's torchrun log goes to
raw/<stage>/<node>/ (srun's %N), the ranks' logs beside it; the run directory is on the cluster's shared
storage, where every node writes. With pyxis, CARDTIME_SRUN_ARGS carries `--container-image` to every srun.
"""

from __future__ import annotations

import shlex
from typing import Sequence

SRUN_ARGS_ENV = "CARDTIME_SRUN_ARGS"  # extra words for every srun (pyxis's --container-image …)

# srun runs this on each node: the node's own raw folder and name, then the node's torchrun.
_PER_NODE = ('node=${SLURMD_NODENAME:-$(hostname)}; export CARDTIME_RAW_DIR="$0/$node" CARDTIME_NODE_NAME="$node"; '
             'mkdir -p "$CARDTIME_RAW_DIR"; exec "$@"')


def srun_launch_command(nnodes: int, raw_dir: str, log_name: str, torchrun_argv: Sequence[str],
                        extra_srun_args: Sequence[str] = ()) -> list[str]:
    """One srun over the allocation's nodes: a task per node, its output in raw_dir/<node>/log_name, a failed
    node ending the others (--kill-on-bad-exit), the suite's environment passed on (--export=ALL)."""
    return ["srun", f"--nodes={nnodes}", f"--ntasks={nnodes}", "--ntasks-per-node=1", "--kill-on-bad-exit=1",
            "--export=ALL", f"--output={raw_dir}/%N/{log_name}", *extra_srun_args,
            "sh", "-c", _PER_NODE, raw_dir, *torchrun_argv]


def sbatch_script(*, checkout: str, python: str, nodes: int, gpus_per_node: int, partition: str, account: str = "",
                  profile: str = "nccl-gpu", stages: str = "", out: str = "runs", time_limit: str = "",
                  container_image: str = "", job_name: str = "cardtime", gpus: bool = True) -> str:
    """The batch script: the allocation asked for, the rendezvous host named, the suite run once on it.
    gpus=False (a CPU profile): no --gpus-per-node, which a cluster without GPU gres refuses."""
    def opt(name: str, value) -> str:
        return f"#SBATCH --{name}={value}\n" if value not in ("", None) else ""

    if nodes < 1 or gpus_per_node < 1:
        raise ValueError(f"NODES={nodes} GPUS_PER_NODE={gpus_per_node}: both must be at least 1")
    run = [python, "-m", "suite", "run", "--profile", profile, "--nproc", str(gpus_per_node), "--out", out,
           "--record-last", f"{out}/LAST"] + (["--stages", stages] if stages else [])
    container = ""
    if container_image:
        mounts = f"--container-image={container_image} --container-mounts={checkout}:{checkout} " \
                 f"--container-workdir={checkout}"
        container = f"export {SRUN_ARGS_ENV}={shlex.quote(mounts)}  # pyxis: every srun runs in the image\n"
    return (
        "#!/bin/bash\n"
        + opt("job-name", job_name) + opt("nodes", nodes) + opt("ntasks-per-node", 1)
        + (opt("gpus-per-node", gpus_per_node) if gpus else "") + "#SBATCH --exclusive\n" + opt("partition", partition)
        + opt("account", account) + opt("time", time_limit) + opt("output", f"{out}/slurm-%j.out")
        + "set -euo pipefail\n"
        + f"cd {shlex.quote(checkout)}\n"
        + 'head=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)\n'
        + 'echo "cardtime: $SLURM_JOB_NUM_NODES nodes ($SLURM_JOB_NODELIST), rendezvous at $head"\n'
        + container
        + f"exec {shlex.join(run)}\n"
    )
