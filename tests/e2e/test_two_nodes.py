"""The suite across a real two-node cluster made of network namespaces (tests/e2e/two_nodes.py).

One cluster serves the whole first test (each two-node launch costs tens of seconds on 2 cores): `make
remote HOSTS=`'s preflight of both nodes (and of an unreachable one), then the bandwidth stage run on node-a with --nodes node-a,node-b — torch's sweep over gloo between the two
namespaces through a c10d rendezvous at node-a, then the inter-node point-to-point matrix — and, after
the cluster is torn down, that nothing it started or made is left.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import time
from pathlib import Path

import pytest

from tests.e2e.remote_loopback import WORKTREE, provisioning
from tests.e2e.two_nodes import IFNAME, _alive, netns_missing, two_node_cluster

pytestmark = [pytest.mark.e2e, pytest.mark.needs("netns")]


@pytest.fixture(scope="module")
def can_make_namespaces():
    why = netns_missing()
    if why:
        pytest.skip(f"no two-node cluster on this machine: {why}")


def suite_run_on_node_a(cluster, out: Path, *extra: str) -> subprocess.CompletedProcess:
    argv = [str(WORKTREE / ".venv" / "bin" / "python"), "-m", "suite", "run", "--profile", "gloo-cpu", "--nproc", "1",
            "--stages", "bandwidth", "--nodes", "node-a,node-b", "--ssh-config", str(cluster.ssh_config),
            "--socket-ifname", IFNAME, "--out", str(out), "--record-last", str(out / "LAST"), *extra]
    command = f"cd {shlex.quote(str(WORKTREE))} && PYTHONPATH={shlex.quote(str(WORKTREE))} {shlex.join(argv)}"
    return cluster.ssh("node-a", command, timeout_s=600, check=False)


def provisioning_remote(cluster, hosts: str, tmp_path: Path) -> subprocess.CompletedProcess:
    """`make remote HOSTS=…` from the root namespace (the laptop), a CPU profile: the preflight of every node."""
    return provisioning("remote", "--host", "", "--hosts", hosts, "--ssh-config", str(cluster.ssh_config),
                        "--profile", "gloo-cpu", "--runtime", "host", "--allow-dirty", "1",
                        "--remote-dir", str(tmp_path / "remote"))


def test_bandwidth_across_two_namespaces(tmp_path, can_make_namespaces):
    out = tmp_path / "runs"
    with two_node_cluster(tmp_path / "cluster") as cluster:
        namespaces, bridge_net = list(cluster.namespaces.values()), cluster.subnet
        refused = cluster.ssh("node-a", f"cd {shlex.quote(str(WORKTREE))} && {WORKTREE}/.venv/bin/python -m suite run "
                              f"--stages bandwidth --nodes node-a,node-c --ssh-config {cluster.ssh_config} "
                              f"--out {out}", check=False)
        preflights = {hosts: provisioning_remote(cluster, hosts, tmp_path) for hosts in ("node-a,node-c", "node-a,node-b")}
        done = suite_run_on_node_a(cluster, out)
        sessions = cluster.pids()
    # make remote HOSTS=: an unreachable node refused in one line naming it; two nodes of one shape agree.
    unreachable = preflights["node-a,node-c"]
    assert unreachable.returncode == 2
    (refusal,) = [line for line in unreachable.stderr.splitlines() if "REFUSED" in line]
    assert "REFUSED: node node-c: cannot connect" in refusal and "checking node node-b" not in unreachable.stderr
    agree = preflights["node-a,node-b"].stderr
    assert "host      node-a" in agree and "host      node-b" in agree and "2 nodes agree" in agree
    # Bad input first: a node that does not answer is refused in one line naming it, before any run directory.
    assert refused.returncode == 2, refused.stderr
    assert "node node-c: unreachable over ssh" in refused.stderr and len(refused.stderr.strip().splitlines()) == 1
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    run = Path((out / "LAST").read_text().strip())
    raw = run / "raw" / "bandwidth"
    # Each node's own output under raw/bandwidth/<node>/: its torchrun's log and its rank's log.
    for node in ("node-a", "node-b"):
        log = (raw / node / "torch.torchrun.log").read_text()
        assert "--rdzv-backend=c10d" in log and "--rdzv-endpoint=node-a:" in log and "--nnodes=2" in log
        assert len(list((raw / node).glob("torch.rank*.log"))) == 1
    assert "ssh" in (raw / "node-b" / "torch.torchrun.log").read_text().splitlines()[0]
    rows = [json.loads(line) for line in (run / "raw" / "bandwidth" / ".stage-rows.jsonl").read_text().splitlines()]
    sweep = [r for r in rows if r["source"] == "torch" and r["metric"] == "wrong"]
    assert len(sweep) >= 6 and {r["world"] for r in sweep} == {2} and all(r["value"] == 0 for r in sweep)
    pairs = {(r["case"], r["metric"]): r["value"] for r in rows if r["source"] == "p2p"}
    assert {c for c, _ in pairs} == {"node-a→node-b", "node-b→node-a"}
    for case in ("node-a→node-b", "node-b→node-a"):
        assert pairs[(case, "wrong")] == 0 and pairs[(case, "busbw")] > 0
    verdicts = {v["id"]: v["status"] for v in json.loads((run / "verdicts.json").read_text())["verdicts"]}
    assert verdicts["bandwidth.p2p_pairs"] == "pass" and verdicts["bandwidth.p2p_wrong"] == "pass"
    assert not [k for k, s in verdicts.items() if s == "fail"], verdicts
    # Teardown: no process the cluster held is alive, no namespace or bridge address is left.
    assert sessions and not [p for p in sessions if _alive(p)]
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert not [ns for ns in namespaces if ns in listed.split()]
    assert bridge_net.rsplit(".", 1)[0] not in subprocess.run(["ip", "-br", "addr"], capture_output=True,
                                                              text=True).stdout


@pytest.mark.needs("openmpi")
def test_mpirun_across_two_namespaces(tmp_path, can_make_namespaces):
    """nccl-tests' launcher words (suite/mpirun.py) start one process on each node, with the NCCL variables."""
    import shutil

    from suite.mpirun import hostfile_text, mpirun_across_nodes
    from suite.multinode import parse_nodes

    if shutil.which("mpirun") is None:
        pytest.skip("mpirun is not installed (apt-get install openmpi-bin)")
    with two_node_cluster(tmp_path / "cluster") as cluster:
        nodes = parse_nodes("node-a,node-b")
        hostfile = tmp_path / "hostfile"
        hostfile.write_text(hostfile_text(nodes, 1))
        words = mpirun_across_nodes("mpirun", nodes, 1, str(hostfile), env={"NCCL_SOCKET_IFNAME": IFNAME},
                                    ssh_config=str(cluster.ssh_config), ifname=IFNAME, as_root=True)
        probe = 'echo "rank=$OMPI_COMM_WORLD_RANK host=$(hostname) if=$NCCL_SOCKET_IFNAME"'
        done = cluster.ssh("node-a", shlex.join([*words, "sh", "-c", probe]), timeout_s=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = sorted(done.stdout.split("\n"))
    assert [line for line in lines if line] == [f"rank=0 host=node-a if={IFNAME}", f"rank=1 host=node-b if={IFNAME}"]


@pytest.mark.needs("slurm")
def test_sbatch_runs_the_suite_across_the_allocation(tmp_path, can_make_namespaces):
    """`make slurm`'s script, submitted to a real slurmctld with a slurmd per namespace: the suite on the batch
    host takes the allocation's nodes by itself and starts each launch as one srun across them."""
    from suite.slurm import sbatch_script
    from tests.e2e.slurm_cluster import slurm_cluster, slurm_missing

    if slurm_missing():
        pytest.skip(f"no Slurm: {slurm_missing()}")
    out = tmp_path / "runs"
    out.mkdir()  # slurmd opens the job's --output there (make slurm makes it too)
    script = tmp_path / "job.sbatch"
    script.write_text(sbatch_script(checkout=str(WORKTREE), python=str(WORKTREE / ".venv" / "bin" / "python"),
                                    nodes=2, gpus_per_node=1, partition="debug", profile="gloo-cpu",
                                    stages="bandwidth", out=str(out), gpus=False))
    with slurm_cluster(tmp_path / "slurm") as (cluster, env):
        env = {**env, "PYTHONPATH": str(WORKTREE), "GLOO_SOCKET_IFNAME": IFNAME}  # sbatch passes it on (ALL)
        submitted = subprocess.run(["sbatch", "--parsable", str(script)], env=env, capture_output=True, text=True)
        assert submitted.returncode == 0, submitted.stderr
        job = submitted.stdout.strip().split(";")[0]
        deadline = time.monotonic() + 400
        while subprocess.run(["squeue", "-h", "-j", job, "-o", "%T"], env=env, capture_output=True,
                             text=True).stdout.strip():
            assert time.monotonic() < deadline, "the job did not leave the queue in 400 s"
            time.sleep(2)
    output = (out / f"slurm-{job}.out").read_text()
    assert "rendezvous at node-a" in output and "2 nodes × 1 processes" in output, output[-3000:]
    run = Path((out / "LAST").read_text().strip())
    raw = run / "raw" / "bandwidth"
    srun = (raw / "torch.srun.log").read_text().splitlines()[0]  # the one command; each node's output under %N
    assert "srun --nodes=2" in srun and "--rdzv-endpoint=node-a:" in srun and "--nnodes=2" in srun
    for node in ("node-a", "node-b"):
        assert (raw / node / "torch.torchrun.log").exists()
        assert len(list((raw / node).glob("torch.rank*.log"))) == 1
        assert len(list((raw / node).glob("pairs.rank*.log"))) == 1
    verdicts = {v["id"]: v["status"] for v in json.loads((run / "verdicts.json").read_text())["verdicts"]}
    assert verdicts["bandwidth.p2p_pairs"] == "pass" and not [k for k, s in verdicts.items() if s == "fail"]
