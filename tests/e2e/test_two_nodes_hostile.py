"""The suite across two nodes as a rented cluster has them (tests/e2e/hostile_lab.py): NAT'd public addresses,
a firewall open to ssh alone from outside, the nodes' private network open, each host name on 127.0.1.1.

One lab for every case (a two-node launch costs tens of seconds on 2 cores), each run on node-a as `make
remote` runs the suite there, the nodes named as the laptop names them (node-a, node-b → their public
addresses):

  1. a rendezvous port closed on node-a: refused in one line (node-b, node-a's address, the port, what to
     open) within seconds, no run directory;
  2. a wrong node address (NODE_ADDRS=): refused in one line naming it;
  3. the launch, on separate disks (its folder a private mount on each node): node addresses asked of the
     nodes (node-a's toward node-b, node-b's toward node-a: the private ones), the fixed port, every
     connection tried, then a torchrun per node with node-a hosting the store at its private address; the
     hand-written all-reduce across both, every element checked against dist.all_reduce on every size;
     node-b's raw output and rows copied back to node-a's disk;
  4. hangs: node-b's second rank stopped, asleep or killed before a collective, each named with its node;
`make remote HOSTS=` from the laptop through this lab (public addresses, port 22 only), the multi-node stages
run to a fetched report: test_two_nodes_ordinary_logins.py, as an ordinary login on separate disks.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import time
from pathlib import Path

import pytest

from tests.e2e import hostile_lab
from tests.e2e.remote_loopback import WORKTREE
from tests.e2e.two_nodes import IFNAME, _alive, netns_missing, two_node_cluster

pytestmark = [pytest.mark.e2e, pytest.mark.needs("netns")]
PYTHON = WORKTREE / ".venv" / "bin" / "python"

LAUNCH = """
import argparse, json, sys
from pathlib import Path
from suite.commands.run import with_nodes
from suite.config import get_profile
from suite.cluster.multilaunch import run_across_nodes
out, ssh_config, ifname = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
args = argparse.Namespace(nodes="node-a,node-b", hostfile=None, ssh_config=ssh_config, socket_ifname=ifname,
                          node_addrs="")
profile = with_nodes(get_profile("gloo-cpu", 1), args)
result = run_across_nodes(profile, "suite.stages.crossover.hand_allreduce",
                          ["--sizes", "8,4096", "--warmup", "1", "--iters", "2"], raw_dir=out, tag="hand", timeout_s=240)
print(json.dumps({"node_addrs": profile.node_addrs, "master_port": profile.master_port,
                  "out_dir": str(result.out_dir)}))
"""  # noqa: E501

# 4. hangs across the nodes, the three kinds at once and beside step 3's launch (each its own rendezvous port:
# the private network is open): node-b's second rank (rank 3 of 2 × 2) stops itself, sleeps, or is killed
# before all_reduce #6; a hang's launch times out and asks every rank before the kill, a killed rank's fails
HANGS = """
import argparse, json, sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from suite.commands.run import with_nodes
from suite.config import get_profile
from suite.cluster.multilaunch import run_across_nodes
from suite.launch.torchrun import LaunchError
out, ssh_config, ifname = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
args = argparse.Namespace(nodes="node-a,node-b", hostfile=None, ssh_config=ssh_config, socket_ifname=ifname,
                          node_addrs="")
profile = with_nodes(get_profile("gloo-cpu", 2).with_overrides(master_port=29410), args)
def drill(kind, port):
    try:
        run_across_nodes(profile.with_overrides(master_port=port), "suite.forensics.drill",
                         ["--kind", kind, "--rank", "3", "--at", "6"], raw_dir=out / kind, tag="hang", timeout_s=60)
    except LaunchError as e:
        return str(e)
    return "no failure"
kinds = {"stop": 29410, "sleep": 29411, "kill": 29412}
with ThreadPoolExecutor(3) as pool:
    print(json.dumps(dict(zip(kinds, pool.map(drill, kinds, kinds.values())))))
"""  # noqa: E501


@pytest.fixture(scope="module")
def can_make_namespaces():
    why = netns_missing()
    if why:
        pytest.skip(f"no two-node cluster on this machine: {why}")
    if subprocess.run(["iptables", "-V"], capture_output=True).returncode != 0:
        pytest.skip("iptables (nf_tables) is not installed: the lab's firewall needs it")


def on_node_a_command(argv: list[str]) -> str:
    return f"cd {shlex.quote(str(WORKTREE))} && PYTHONPATH={shlex.quote(str(WORKTREE))} {shlex.join(argv)}"


def on_node_a(cluster, argv: list[str], timeout_s: float = 400) -> subprocess.CompletedProcess:
    return cluster.ssh("node-a", on_node_a_command(argv), timeout_s=timeout_s, check=False)


def suite_run(cluster, out: Path, *extra: str) -> subprocess.CompletedProcess:
    return on_node_a(
        cluster,
        [
            str(PYTHON),
            "-m",
            "suite",
            "run",
            "--stages",
            "bandwidth",
            "--nodes",
            "node-a,node-b",
            "--ssh-config",
            str(cluster.ssh_config),
            "--socket-ifname",
            IFNAME,
            "--out",
            str(out),
            *extra,
        ],
        timeout_s=300,
    )


def test_rendezvous_through_nat_and_firewall(tmp_path, can_make_namespaces):
    timings: dict[str, float] = {}
    with two_node_cluster(tmp_path / "cluster", hostile=True, private=tmp_path / "launch") as cluster:
        namespaces = [
            *cluster.namespaces.values(),
            hostile_lab.router_namespace(next(iter(cluster.namespaces.values()))[:-1]),
        ]
        a, b = cluster.address("node-a"), cluster.address("node-b")
        # the lab is what it claims: the laptop reaches ssh at the public address, not the port behind it
        laptop_ssh = subprocess.run(
            cluster.ssh_argv("node-a", "hostname"), capture_output=True, text=True, timeout=60
        )
        probe = [
            "python3",
            "-c",
            "import socket,sys; socket.create_connection((sys.argv[1], 29400), timeout=3)",
            cluster.public_address("node-a"),
        ]
        listener = subprocess.Popen(
            [
                "ip",
                "netns",
                "exec",
                cluster.namespaces["node-a"],
                "python3",
                "-c",
                "import socket,time; s=socket.create_server(('0.0.0.0', 29400)); time.sleep(20)",
            ]
        )
        time.sleep(1.0)
        laptop_port = subprocess.run(probe, capture_output=True, text=True, timeout=30)
        listener.kill()
        listener.wait()
        hostname_line = cluster.ssh("node-a", "getent hosts node-a").stdout.strip()

        rule = hostile_lab.close_port(cluster.namespaces["node-a"], 29400)
        started = time.monotonic()
        closed = suite_run(cluster, tmp_path / "closed")
        timings["closed port refused"] = time.monotonic() - started
        hostile_lab.reopen_port(cluster.namespaces["node-a"], rule)

        rule = hostile_lab.close_picked_ports(cluster.namespaces["node-a"])
        started = time.monotonic()
        picked = suite_run(cluster, tmp_path / "picked")
        timings["closed picked ports refused"] = time.monotonic() - started
        hostile_lab.reopen_port(cluster.namespaces["node-a"], rule)

        # node addresses unknown to known_hosts (names and the public addresses the laptop dials stay): ssh to
        # node-b by name works, mpirun's ssh to node-b's node address would not
        known = cluster.ssh_config.parent / "known_hosts"
        by_address = known.read_text()
        private = {a, b}
        known.write_text(
            "".join(
                ",".join(h for h in hosts.split(",") if h not in private) + " " + key
                for hosts, key in (line.split(" ", 1) for line in by_address.splitlines(True))
            )
        )
        started = time.monotonic()
        names_only = suite_run(cluster, tmp_path / "names-only")
        timings["host keys by name only refused"] = time.monotonic() - started
        known.write_text(by_address)

        started = time.monotonic()
        wrong = suite_run(cluster, tmp_path / "wrong", "--node-addrs", f"{a},{cluster.net}.99")
        timings["wrong address refused"] = time.monotonic() - started

        started = time.monotonic()
        hangs = subprocess.Popen(
            cluster.ssh_argv(
                "node-a",
                on_node_a_command(
                    [
                        str(PYTHON),
                        "-c",
                        HANGS,
                        str(tmp_path / "launch" / "hang"),
                        str(cluster.ssh_config),
                        IFNAME,
                    ]
                ),
            ),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        launched = on_node_a(
            cluster, [str(PYTHON), "-c", LAUNCH, str(tmp_path / "launch"), str(cluster.ssh_config), IFNAME]
        )
        timings["launch through the NAT'd names"] = time.monotonic() - started
        hung_out, hung_err = hangs.communicate(timeout=400)
        timings["hangs across the nodes named (beside the launch)"] = time.monotonic() - started

        sessions = cluster.pids()
    print("; ".join(f"{k}: {v:.1f} s" for k, v in timings.items()))
    assert laptop_ssh.stdout.strip() == "node-a" and laptop_port.returncode != 0
    assert hostname_line.startswith("127.0.1.1"), hostname_line
    # 1. the closed rendezvous port: one line, from node-b, naming node-a's private address and the port
    assert closed.returncode == 2, closed.stdout[-2000:] + closed.stderr[-2000:]
    assert closed.stderr.strip().count("\n") == 0, closed.stderr
    assert (
        f"node node-b cannot connect to node node-a at {a}:29400, the rendezvous port (c10d's store on node "
        f"0) "
        "(timed out)"
    ) in closed.stderr and "open TCP 29400 on it" in closed.stderr
    assert not (tmp_path / "closed").exists() or not list((tmp_path / "closed").iterdir())
    # 1b. open to ssh and the rendezvous only: the port node-a's kernel picked (as gloo's and NCCL's sockets
    # after the rendezvous) is refused from node-b, naming what to open
    assert picked.returncode == 2 and picked.stderr.strip().count("\n") == 0, picked.stderr
    assert f"node node-b cannot connect to node node-a at {a}:" in picked.stderr
    assert "a port the kernel picked as gloo's and NCCL's sockets use" in picked.stderr
    assert "not only 22 and 29400" in picked.stderr
    # 1c. host keys known by name only: mpirun's ssh to node-b's address refused at preflight, with the fix
    assert names_only.returncode == 2 and names_only.stderr.strip().count("\n") == 0, names_only.stderr
    assert f"node node-a cannot log in to node node-b at {b} as mpirun will (" in names_only.stderr
    assert "Host key verification failed" in names_only.stderr and "HostKeyAlias node-b" in names_only.stderr
    # 2. a wrong node address: refused from node-a, naming it
    assert wrong.returncode == 2 and wrong.stderr.strip().count("\n") == 0, wrong.stderr
    assert f"node node-a cannot connect to node node-b at {cluster.net}.99:22, ssh (" in wrong.stderr
    assert "NODE_ADDRS=" in wrong.stderr
    # 3. the launch: the private addresses found by asking, node-a hosting the store there, the sums exact
    assert launched.returncode == 0, launched.stdout[-3000:] + launched.stderr[-3000:]
    said = json.loads(launched.stdout.strip().splitlines()[-1])
    assert said["node_addrs"] == [a, b] and said["master_port"] == 29400
    # separate disks: node-b wrote on its own; its folder and its rank's rows were copied back to node-a's
    here, there = cluster.disk("node-a"), cluster.disk("node-b")
    assert len(list((there / "node-b").glob("hand.rank*.log"))) == 1 and not (there / "node-a").exists()
    assert (there / "hand.out" / "rows.rank1.jsonl").is_file() and not (
        there / "hand.out" / "rows.rank0.jsonl"
    ).exists()
    assert not list((tmp_path / "launch").iterdir())  # beneath the mounts: neither node wrote there
    words = {n: (here / n / "hand.torchrun.log").read_text().splitlines()[0] for n in ("node-a", "node-b")}
    assert len(list((here / "node-b").glob("hand.rank*.log"))) == 1
    assert f"--rdzv-endpoint={a}:29400" in words["node-a"] and f"--rdzv-endpoint={a}:29400" in words["node-b"]
    assert "is_host=1" in words["node-a"] and f"--local-addr={a}" in words["node-a"]
    assert "is_host=0" in words["node-b"] and f"--local-addr={b}" in words["node-b"]
    out_dir = here / Path(said["out_dir"]).relative_to(tmp_path / "launch")
    assert sorted(p.name for p in out_dir.glob("rows.rank*.jsonl")) == [
        "rows.rank0.jsonl",
        "rows.rank1.jsonl",
    ]
    rows = [
        json.loads(line)
        for f in sorted(out_dir.glob("rows.rank*.jsonl"))
        for line in f.read_text().splitlines()
    ]
    wrong_rows = [r for r in rows if r["metric"] == "wrong" and not r["case"].startswith("mistake.")]
    assert {r["case"] for r in wrong_rows} == {"ring", "tree"} and len(wrong_rows) >= 4
    assert all(r["value"] == 0 and r["world"] == 2 for r in wrong_rows), wrong_rows
    # 4. the hangs: rank 3 named with its node each time (its hello is on node-b's disk: a stopped or asleep
    # rank's node is read from node-b's rank that answered; a killed rank's from its launch's failure)
    assert hangs.returncode == 0, hung_err[-3000:]
    told = json.loads(hung_out.strip().splitlines()[-1])
    assert "timed out after 60 s on 2 nodes" in told["stop"], told
    assert "Forensics: rank 3 on node-b did not answer" in told["stop"], told
    assert "the other 3 wait in all_reduce #6" in told["stop"], told
    assert "Forensics: rank 3 on node-b never entered all_reduce #6 (it is at drill.py:" in told["sleep"], (
        told
    )
    assert "the other 3 wait in it" in told["sleep"], told
    found = json.loads((here / "hang" / "stop" / "hang.forensics.json").read_text())
    assert {r["rank"]: r["host"] for r in found["rows"]} == {
        0: "node-a",
        1: "node-a",
        2: "node-b",
        3: "node-b",
    }
    assert (there / "hang" / "stop" / "node-b" / "hang.forensics" / "rank3.hello.json").is_file()  # node-b's
    # either node's torchrun may be seen to exit first (node-a's ranks raise on the lost connection)
    assert re.search(r"on node node-[ab] exited", told["kill"]) and "all_reduce #6" in told["kill"], told
    assert "rank 3 on node-b" in told["kill"], told
    # teardown: nothing left running, no namespace left (the router's included)
    assert sessions and not [p for p in sessions if _alive(p)]
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
    assert not [ns for ns in namespaces if ns in listed]
