"""A real Slurm over the two-node cluster (tests/e2e/two_nodes.py; the recipe and its traps:
shared/MULTINODE.md).

A private munged and slurmctld in this (the login) namespace on the bridge address, one slurmd in each node's
namespace with the node's hostname and /etc/hosts (through nsenter: `ip netns exec` remounts /sys and slurmd
then finds no cgroup filesystem). Everything this starts is stopped by PID at the end, on failure too; the
node namespaces go with the cluster.

    with slurm_cluster(tmp_path) as (cluster, env):     # env: SLURM_CONF set, for sbatch/squeue/scontrol
        subprocess.run(["sbatch", script], env=env)
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Iterator

from tests.e2e.two_nodes import NODES, _stop_pids, two_node_cluster

SLURM_TOOLS = ("slurmctld", "slurmd", "sbatch", "squeue", "munged")


def slurm_missing() -> str | None:
    import shutil

    lacking = [t for t in SLURM_TOOLS if shutil.which(t) is None and not Path(f"/usr/sbin/{t}").exists()]
    return (
        f"{', '.join(lacking)} not installed (apt-get install slurmctld slurmd slurm-client munge)"
        if lacking
        else None
    )


def slurm_conf(folder: Path, cluster, sockets: Path | None = None) -> str:
    """`sockets`: where munge's socket and the slurmd spools (slurmstepd's sockets) go, `folder` by
    default."""
    sockets = sockets or folder
    nodes = "".join(
        f"NodeName={n} NodeAddr={cluster.address(n)} NodeHostname={n} CPUs=2 RealMemory=1000\n" for n in NODES
    )
    return (
        f"ClusterName=cardtime\nSlurmctldHost={socket.gethostname()}({cluster.net}.254)\n"
        f"SlurmUser=root\nSlurmdUser=root\nAuthType=auth/munge\nCredType=cred/munge\n"
        f"AuthInfo=socket={sockets}/munge/munge.sock\nStateSaveLocation={folder}/state\n"
        f"SlurmdSpoolDir={sockets}/spool/%n\nSlurmctldPidFile={folder}/slurmctld.pid\n"
        f"SlurmdPidFile={folder}/slurmd.%n.pid\nSlurmctldLogFile={folder}/slurmctld.log\n"
        f"SlurmdLogFile={folder}/slurmd.%n.log\nProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\n"
        "JobAcctGatherType=jobacct_gather/none\nAccountingStorageType=accounting_storage/none\n"
        "SwitchType=switch/none\nMpiDefault=none\nSchedulerType=sched/backfill\nSelectType=select/cons_tres\n"
        "SelectTypeParameters=CR_Core\nReturnToService=2\nSlurmctldTimeout=30\nSlurmdTimeout=30\nKillWait=5\n"
        f"MinJobAge=60\n{nodes}PartitionName=debug Nodes={','.join(NODES)} Default=YES State=UP "
        f"OverSubscribe=YES\n"
    )


def wait_idle(env: dict[str, str], timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        shown = subprocess.run(
            ["sinfo", "-h", "-o", "%T %D"], env=env, capture_output=True, text=True
        ).stdout.split()
        if shown[:2] == ["idle", str(len(NODES))]:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"the Slurm nodes are not idle after {timeout_s} s: sinfo says {' '.join(shown)}"
            )
        time.sleep(0.5)


@contextlib.contextmanager
def slurm_cluster(folder: Path) -> Iterator[tuple[object, dict[str, str]]]:
    folder.mkdir(parents=True, exist_ok=True)
    # slurmstepd's sockets (spool/<node>/<node>_<job>.<step>) and munge's must fit a Unix socket path (107
    # bytes): a test's folder under a pytest worker's temporary root is too deep for them, so they go to a
    # short one
    sockets = Path(tempfile.mkdtemp(prefix="ct-slurm-", dir="/tmp"))
    (folder / "state").mkdir()
    for sub in ("spool", "munge"):
        (sockets / sub).mkdir()
    key = folder / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    started: list[subprocess.Popen] = []
    try:
        with two_node_cluster(folder / "cluster") as cluster:
            conf = folder / "slurm.conf"
            conf.write_text(slurm_conf(folder, cluster, sockets))
            env = {**os.environ, "SLURM_CONF": str(conf)}
            log = open(folder / "daemons.log", "w")
            started.append(
                subprocess.Popen(
                    [
                        "munged",
                        "--foreground",
                        "--force",
                        f"--socket={sockets}/munge/munge.sock",
                        f"--key-file={key}",
                        f"--pid-file={folder}/munged.pid",
                        f"--seed-file={folder}/munge.seed",
                        f"--log-file={folder}/munged.log",
                    ],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            )
            deadline = time.monotonic() + 20
            while not (sockets / "munge" / "munge.sock").exists() and time.monotonic() < deadline:
                time.sleep(0.1)
            started.append(
                subprocess.Popen(
                    ["slurmctld", "-D", "-f", str(conf)], env=env, stdout=log, stderr=subprocess.STDOUT
                )
            )
            for node, ns in cluster.namespaces.items():
                inner = (
                    f"mount --bind {cluster.folder / 'hosts'} /etc/hosts && hostname {node} && "
                    f"exec slurmd -D -f {conf} -N {node}"
                )
                started.append(
                    subprocess.Popen(
                        [
                            "nsenter",
                            f"--net=/run/netns/{ns}",
                            "unshare",
                            "--uts",
                            "--mount",
                            "--propagation",
                            "private",
                            "sh",
                            "-c",
                            inner,
                        ],
                        env=env,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                    )
                )
            wait_idle(env)
            yield cluster, env
            _stop_pids([p.pid for p in started])  # before the namespaces go
    finally:
        _stop_pids([p.pid for p in started])
        for proc in started:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5)
        shutil.rmtree(sockets, ignore_errors=True)
