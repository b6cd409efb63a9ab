"""The suite across a real two-node cluster made of network namespaces (tests/e2e/two_nodes.py).

One cluster serves the whole first test (each two-node launch costs tens of seconds on 2 cores): `make
remote HOSTS=` refusing an unreachable node and a first node without the keys to reach the second, then
`make remote HOSTS=node-a,node-b` end to end — the code on both, the venv on both, `python -m suite run
--nodes node-a,node-b --nproc 2` detached on node-a (topology; bandwidth: torch's sweep over gloo between the
two namespaces through a c10d rendezvous at node-a, the inter-node point-to-point matrix, then each node's own
sweep; baseline; dp at 1 and 2 ranks on node-a and 4 across both), followed,
fetched as one run directory holding both nodes' raw output, reported — and, after the cluster is torn down,
that nothing it started or made is left. The fault stage's node-loss drill runs through `make remote` in the
hostile lab, on separate disks, as an ordinary login (test_two_nodes_ordinary_logins.py).
"""

from __future__ import annotations

import csv
import json
import os
import shlex
import subprocess
import time
from pathlib import Path

import pytest

from tests.e2e.remote_loopback import WORKTREE, host_venv_cache, make_repo, provisioning
from tests.e2e.two_nodes import IFNAME, _alive, netns_missing, two_node_cluster

pytestmark = [pytest.mark.e2e, pytest.mark.needs("netns")]


@pytest.fixture(scope="module")
def can_make_namespaces():
    why = netns_missing()
    if why:
        pytest.skip(f"no two-node cluster on this machine: {why}")


def provisioning_remote(
    cluster, hosts: str, tmp_path: Path, laptop: Path, *extra: str
) -> subprocess.CompletedProcess:
    """`make remote HOSTS=…` from the root namespace (the laptop, a fresh repository of this tree's files)
    with a CPU profile, RUNTIME=host and a remote folder every node sees (the namespaces share this machine's
    disk)."""
    return provisioning(
        "remote",
        "--host",
        "",
        "--hosts",
        hosts,
        "--ssh-config",
        str(cluster.ssh_config),
        "--profile",
        "gloo-cpu",
        "--runtime",
        "host",
        "--remote-dir",
        str(tmp_path / "remote"),
        "--runs-dir",
        str(tmp_path / "fetched"),
        "--detach",
        "setsid",
        *extra,
        cwd=laptop,
    )


def foreign_ssh_config(cluster, folder: Path) -> Path:
    """The cluster's ssh_config but with a key no node authorizes: the first node cannot reach the others."""
    key = folder / "stranger_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    text = cluster.ssh_config.read_text().replace(str(cluster.folder / "client_key"), str(key))
    (folder / "stranger_config").write_text(text)
    return folder / "stranger_config"


def assert_intra_and_inter_node_bandwidth(run: Path, rows: list[dict], verdicts: dict[str, str]) -> None:
    """The bandwidth stage's split (suite/stages/bandwidth/intra_node.py): each node's own 2-rank sweep,
    started on both at once (node-b's over ssh), its output under raw/bandwidth/<node>/ and its rows named for
    it, exact; beside them the 4-rank sweep across both nodes; both α-β fits in the run's facts; the floors
    and the verdicts."""
    raw = run / "raw" / "bandwidth"
    for node in ("node-a", "node-b"):
        assert "intra-node torch sweep: 2 ranks" in (raw / node / "intra.log").read_text()
        assert (
            len(list((raw / node).glob("intra.rank*.log"))) == 2
            and (raw / node / "intra-rows.jsonl").is_file()
        )
        # a one-node launch, as gloo-cpu's
        assert "fork launcher" in (raw / node / "intra.launcher.log").read_text()
    assert "ssh" in (raw / "node-b" / "intra.log").read_text().splitlines()[0]
    intra: dict[tuple[str, str], list] = {}
    for r in rows:
        if r["case"].startswith("intra.") and r["source"] == "torch" and r["metric"] in ("busbw", "wrong"):
            inner, _, node = r["case"][len("intra.") :].rpartition("@")
            intra.setdefault((node, r["metric"]), []).append((inner, r))
    assert sorted(intra) == [
        ("node-a", "busbw"),
        ("node-a", "wrong"),
        ("node-b", "busbw"),
        ("node-b", "wrong"),
    ]
    collectives = {"all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "sendrecv"}
    for node in ("node-a", "node-b"):
        wrong, busbw = intra[(node, "wrong")], intra[(node, "busbw")]
        assert {c for c, _ in wrong} == collectives and len(wrong) >= 12
        assert all(r["value"] == 0 and r["world"] == 2 for _, r in wrong), wrong
        # every size moved bytes inside the node
        assert all(r["value"] > 0 and r["world"] == 2 for _, r in busbw)
    across = [
        r for r in rows if r["case"] == "all_reduce" and r["source"] == "torch" and r["metric"] == "busbw"
    ]
    assert across and {r["world"] for r in across} == {4}  # the inter-node rows keep their plain cases
    facts = json.loads((run / "manifest.json").read_text())["facts"]
    assert facts["alpha_beta_intra"]["world"] == 2 and facts["alpha_beta"]["world"] == 4
    assert (
        set(facts["alpha_beta_intra"]) == set(facts["alpha_beta"])
        and facts["alpha_beta_intra"]["beta_Bps"] > 0
    )
    assert facts["node_nics"] == {
        n: {"nics": 1, "line_gbps": 10.0, "total_gbps": 10.0} for n in ("node-a", "node-b")
    }
    with open(run / "expectations.csv", newline="") as f:
        floors = {
            e["case"]: e
            for e in csv.DictReader(f)
            if e["stage"] == "bandwidth" and e["metric"] == "busbw_min"
        }
    # 70% × 10 Gb/s; no GPU peak
    assert set(floors) == collectives and float(floors["all_reduce"]["value"]) == 0.875
    assert verdicts["bandwidth.intra_sweep"] == "pass"
    assert {k: s for k, s in verdicts.items() if k.startswith("bandwidth.intra_wrong.")} == {
        f"bandwidth.intra_wrong.torch.{c}": "pass" for c in collectives
    }
    assert verdicts["bandwidth.performance"] == "skip" and not [k for k in verdicts if "launch.intra" in k]
    report = (run / "report.html").read_text()
    assert (
        "all_reduce busbw intra " in report
        and " vs inter " in report
        and "reaches the red intra-node floor" in report
    )


def test_make_remote_across_two_namespaces(tmp_path, can_make_namespaces):
    laptop = make_repo(tmp_path / "laptop")
    remote_dir = tmp_path / "remote"
    remote_dir.mkdir()
    # the nodes keep their venvs across runs; so do the tests
    (remote_dir / "venvs").symlink_to(host_venv_cache())
    with two_node_cluster(tmp_path / "cluster") as cluster:
        namespaces, bridge_net = list(cluster.namespaces.values()), cluster.subnet
        refused = cluster.ssh(
            "node-a",
            f"cd {shlex.quote(str(WORKTREE))} && {WORKTREE}/.venv/bin/python -m suite run "
            f"--stages bandwidth --nodes node-a,node-c --ssh-config {cluster.ssh_config} "
            f"--out {tmp_path / 'direct'}",
            check=False,
        )
        unreachable = provisioning_remote(cluster, "node-a,node-c", tmp_path, laptop)
        no_keys = provisioning_remote(
            cluster,
            "node-a,node-b",
            tmp_path,
            laptop,
            "--node-ssh-config",
            str(foreign_ssh_config(cluster, tmp_path)),
        )
        jobs_after_refusals = list(remote_dir.glob("jobs/*/job.json"))
        nccl_env = tmp_path / "nccl.env"  # NCCL_ENV=: to every rank of both nodes (harmless to gloo)
        nccl_env.write_text("NCCL_IB_HCA=mlx5_0,mlx5_3\nexport FI_PROVIDER=efa\n")
        started = time.monotonic()
        done = provisioning_remote(
            cluster,
            "node-a,node-b",
            tmp_path,
            laptop,
            "--stages",
            "topology,bandwidth,baseline,dp",
            "--node-ssh-config",
            str(cluster.ssh_config),
            "--socket-ifname",
            IFNAME,
            "--nproc",
            "2",
            "--nccl-env",
            str(nccl_env),
        )
        run_s = time.monotonic() - started
        sessions = cluster.pids()
    # Bad input first: a node that does not answer is refused in one line naming it, before any run directory.
    assert unreachable.returncode == 2
    (refusal,) = [line for line in unreachable.stderr.splitlines() if "REFUSED" in line]
    assert (
        "REFUSED: node node-c: cannot connect" in refusal and "checking node node-b" not in unreachable.stderr
    )
    assert refused.returncode == 2, refused.stderr
    assert (
        "node node-c: unreachable over ssh" in refused.stderr
        and len(refused.stderr.strip().splitlines()) == 1
    )
    # Both nodes pass the preflight, but the first cannot reach the second with the keys it has: refused with
    # the fix.
    (refusal,) = [line for line in no_keys.stderr.splitlines() if "REFUSED" in line]
    assert no_keys.returncode == 2 and "2 nodes agree" in no_keys.stderr
    assert "node node-a cannot reach node node-b over ssh without a password (" in refusal
    assert "ssh-copy-id" in refusal and not jobs_after_refusals
    # The run: every node checked, the code shipped (once: the nodes share the disk), the venv found on both,
    # the suite detached on node-a across both, followed, fetched into one run directory, reported.
    out = done.stderr
    assert done.returncode == 0, out[-5000:]
    assert "host      node-a" in out and "host      node-b" in out and "2 nodes agree" in out
    assert "node-a reaches node-b over ssh without a password" in out
    # node-a's shipping put the code on the shared disk
    assert "node node-b: " in out and "already there" in out
    assert "[node-b] venv " in out and " reused" in out
    run = Path((tmp_path / "fetched" / "LAST").read_text().strip())
    assert run.parent == tmp_path / "fetched" and (run / "report.html").exists()
    assert_dp_crossed_both_nodes(run)
    record = json.loads((run / "remote.json").read_text())
    assert record["hosts"] == ["node-a", "node-b"] and record["job"]["nodes"] == "node-a,node-b"
    assert "--nodes" in record["job"]["argv"] and "node-a,node-b" in record["job"]["argv"]
    raw = run / "raw" / "bandwidth"
    # Each node's own output under raw/bandwidth/<node>/: its torchrun's log and its rank's log.
    for node in ("node-a", "node-b"):
        log = (raw / node / "torch.torchrun.log").read_text()
        assert "--rdzv-backend=c10d" in log and "--nnodes=2" in log
        # node-a's address toward node-b, asked of the nodes; the fixed port; node-a hosts the store
        assert (
            f"--rdzv-endpoint={cluster.address('node-a')}:29400" in log
            and f"--local-addr={cluster.address(node)}" in log
        )
        assert f"is_host={int(node == 'node-a')}" in log
        assert len(list((raw / node).glob("torch.rank*.log"))) == 2
    node_b = (raw / "node-b" / "torch.torchrun.log").read_text().splitlines()[0]
    assert "ssh" in node_b
    # NCCL_ENV='s settings: node-b's torchrun (and so its ranks) started with them, the manifest records them
    assert "NCCL_IB_HCA=mlx5_0,mlx5_3" in node_b and "FI_PROVIDER=efa" in node_b, node_b
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["env_file"]["vars"] == {"NCCL_IB_HCA": "mlx5_0,mlx5_3", "FI_PROVIDER": "efa"}
    assert "--env-file" in record["job"]["argv"] and record["job"]["nccl_env"]
    rows = [
        json.loads(line)
        for line in (run / "raw" / "bandwidth" / ".stage-rows.jsonl").read_text().splitlines()
    ]
    # the nodes' own sweeps: assert_intra_and_inter_node_bandwidth
    sweep = [
        r
        for r in rows
        if r["source"] == "torch" and r["metric"] == "wrong" and not r["case"].startswith("intra.")
    ]
    assert len(sweep) >= 6 and {r["world"] for r in sweep} == {4} and all(r["value"] == 0 for r in sweep)
    pairs = {(r["case"], r["metric"]): r["value"] for r in rows if r["source"] == "p2p"}
    assert {c for c, _ in pairs} == {"node-a→node-b", "node-b→node-a"}
    for case in ("node-a→node-b", "node-b→node-a"):
        assert pairs[(case, "wrong")] == 0 and pairs[(case, "busbw")] > 0
    verdicts = {v["id"]: v["status"] for v in json.loads((run / "verdicts.json").read_text())["verdicts"]}
    assert verdicts["bandwidth.p2p_pairs"] == "pass" and verdicts["bandwidth.p2p_wrong"] == "pass"
    assert not [k for k, s in verdicts.items() if s == "fail"], verdicts
    # topology per node: each node's NICs from its own namespace (its veth, at the veth's 10 Gb/s), compared.
    topo_rows = [
        json.loads(line) for line in (run / "raw" / "topology" / ".stage-rows.jsonl").read_text().splitlines()
    ]
    nics = {r["case"]: (r["value"], r["text"]) for r in topo_rows if r["metric"] == "nic_rate"}
    assert nics == {f"node-a:{IFNAME}": (10.0, "up"), f"node-b:{IFNAME}": (10.0, "up")}, nics
    assert verdicts["topology.nics"] == "pass"
    for node in ("node-a", "node-b"):  # the probe's own output on each node, fetched with the run
        assert (run / "raw" / "topology" / node / "nic-rows.jsonl").is_file()
        assert "1 NICs, 0 errors" in (run / "raw" / "topology" / node / "nics.log").read_text()
    assert "ssh" in (run / "raw" / "topology" / "node-b" / "nics.log").read_text().splitlines()[0]
    assert_intra_and_inter_node_bandwidth(run, rows, verdicts)
    print(f"make remote HOSTS=node-a,node-b (topology, bandwidth, baseline, dp): {run_s:.1f} s")
    # Teardown: no process the cluster held is alive, no namespace or bridge address is left.
    assert sessions and not [p for p in sessions if _alive(p)]
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert not [ns for ns in namespaces if ns in listed.split()]
    assert (
        bridge_net.rsplit(".", 1)[0]
        not in subprocess.run(["ip", "-br", "addr"], capture_output=True, text=True).stdout
    )


def assert_dp_crossed_both_nodes(run: Path) -> None:
    """dp with --nproc 2 on two nodes: DP = 1, 2 on node-a's ranks, 4 across both, every node's raw output
    fetched, the parameters equal to one process's at every degree, and the cross-node degree's expectations
    held to the inter-node fit that the bandwidth stage measured across the nodes. (zero's workload below the
    world, the same sub-groups: tests/dist/test_parallel_golden.py; its cross-node judgement:
    tests/unit/test_scaling_across_nodes.py.)"""
    import csv

    expectations = list(csv.DictReader((run / "expectations.csv").open()))
    verdicts = {v["id"]: v for v in json.loads((run / "verdicts.json").read_text())["verdicts"]}
    stage, degrees = "dp", {1, 2, 4}
    for node in ("node-a", "node-b"):
        log = (run / "raw" / stage / node / f"{stage}.torchrun.log").read_text()
        assert "--nnodes=2" in log and "--nproc-per-node=2" in log
        assert len(list((run / "raw" / stage / node).glob(f"{stage}.rank*.log"))) == 2
    rows = [json.loads(line) for line in (run / "raw" / stage / ".stage-rows.jsonl").read_text().splitlines()]
    golden = [r for r in rows if r["case"] == "params_after_training" and r["metric"] == "max_abs_error"]
    bound = {
        float(e["value"]) for e in expectations if e["stage"] == stage and e["metric"] == "max_abs_error"
    }
    assert {r["world"] for r in golden} == degrees and len(bound) == 1 and len(golden) == len(degrees)
    assert all(r["value"] <= next(iter(bound)) for r in golden), golden
    spanned = {r["world"]: r for r in rows if r["metric"] == "nodes_spanned"}
    assert set(spanned) == degrees and spanned[4]["value"] == 2
    assert set(spanned[4]["text"].split(",")) == {"node-a", "node-b"}
    assert all(spanned[d]["value"] == 1 for d in degrees - {4})
    assert {r["world"] for r in rows if r["metric"] == "step_time_s"} == degrees
    cross = [
        e
        for e in expectations
        if e["stage"] == stage and e["world"] == "4" and e["metric"] in ("efficiency", "step_time_s")
    ]
    assert cross and all(
        "across 2 nodes" in e["basis"] and "the inter-node fit over all 2 nodes" in e["basis"] for e in cross
    ), cross
    within = [
        e
        for e in expectations
        if e["stage"] == stage and e["world"] == "2" and e["metric"] in ("efficiency", "step_time_s")
    ]
    assert within and not [e for e in within if "inter-node" in e["basis"]]
    assert verdicts[f"{stage}.nodes"]["status"] == "pass"
    assert all(verdicts[f"dp.golden.world{d}"]["status"] == "pass" for d in (1, 2, 4))
    assert "4 ranks across 2 nodes" in verdicts["dp.decay"]["observed"]
    assert "4 ranks across 2 nodes held to the inter-node β" in verdicts["dp.decay"]["expected"]
    report = (run / "report.html").read_text()
    assert "DP=4 across 2 nodes scaling efficiency" in report


@pytest.mark.needs("openmpi")
def test_mpirun_across_two_namespaces(tmp_path, can_make_namespaces):
    """nccl-tests' launcher words (suite/cluster/mpirun.py) start one process on each node, with the NCCL
    variables: the hostfile by the node addresses, Open MPI held to them (no SOCKET_IFNAME) while each node
    has a second NIC with an address the other node cannot reach."""
    import shutil

    from suite.cluster.mpirun import hostfile_text, mpirun_across_nodes
    from suite.cluster.multinode import parse_nodes

    if shutil.which("mpirun") is None:
        pytest.skip("mpirun is not installed (apt-get install openmpi-bin)")
    with two_node_cluster(tmp_path / "cluster") as cluster:
        nodes = parse_nodes("node-a,node-b")
        addrs = [cluster.address(n) for n in ("node-a", "node-b")]
        # The second NIC: a veth whose peer goes nowhere, both nodes' on one subnet that joins nothing (as
        # docker0's 172.17.0.1/16 on every node).
        for i, ns in enumerate(cluster.namespaces.values(), 1):
            for argv in (
                ["link", "add", "nic2", "type", "veth", "peer", "name", "nic2-peer"],
                ["addr", "add", f"10.{180 + os.getpid() % 20}.0.{i}/24", "dev", "nic2"],
                ["link", "set", "nic2", "up"],
                ["link", "set", "nic2-peer", "up"],
            ):
                subprocess.run(["ip", "-n", ns, *argv], check=True)
        hostfile = tmp_path / "hostfile"
        hostfile.write_text(hostfile_text(nodes, 1, addrs))
        words = mpirun_across_nodes(
            "mpirun",
            nodes,
            1,
            str(hostfile),
            env={"NCCL_SOCKET_IFNAME": IFNAME},
            ssh_config=str(cluster.ssh_config),
            as_root=True,
            addrs=addrs,
        )
        probe = 'echo "rank=$OMPI_COMM_WORLD_RANK host=$(hostname) if=$NCCL_SOCKET_IFNAME"'
        done = cluster.ssh("node-a", shlex.join([*words, "sh", "-c", probe]), timeout_s=120, check=False)
    assert hostfile.read_text() == f"{addrs[0]} slots=1\n{addrs[1]} slots=1\n"
    assert words[words.index("btl_tcp_if_include") + 1] == f"{addrs[0]}/32,{addrs[1]}/32"
    assert words[words.index("oob_tcp_if_include") + 1] == f"{addrs[0]}/32,{addrs[1]}/32"
    assert done.returncode == 0, done.stderr[-2000:]
    lines = sorted(done.stdout.split("\n"))
    assert [line for line in lines if line] == [
        f"rank=0 host=node-a if={IFNAME}",
        f"rank=1 host=node-b if={IFNAME}",
    ]
