"""Under Slurm every node runs one srun's argv: its per-node shell (suite/cluster/slurm.py) must make node 0
the c10d store's host and every node announce its own address. The shell is run for real by sh, as each node's
task would run it (SLURMD_NODENAME set), on 1, 2 and 4 nodes; the batch script on the same counts."""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

import pytest

from suite.cluster.multinode import parse_nodes, torchrun_node_command
from suite.cluster.slurm import IS_HOST_MARK, NODE_ADDR_MARK, sbatch_script, srun_launch_command
from suite.cluster.slurm_network import (
    connect_argv,
    node_plan,
    parse_node_addrs_shown,
    results_by_target,
    slurm_node_addrs,
)

DATA = Path(__file__).resolve().parents[1] / "data" / "slurm"


def each_nodes_argv(
    tmp_path: Path, names: list[str], addrs: list[str], elastic: bool = False
) -> dict[str, list[str]]:
    """The argv each node's task would exec, printed one word a line instead of exec'd."""
    nodes = parse_nodes(names)
    torchrun = torchrun_node_command(
        "py",
        "suite.workloads.x",
        ["--a", "1"],
        nproc=2,
        nnodes=len(names),
        endpoint=f"{addrs[0]}:29400",
        rdzv_id="r",
        is_host=IS_HOST_MARK,
        local_addr=NODE_ADDR_MARK,
        min_nodes=len(names) - 1 if elastic else None,
    )
    argv = srun_launch_command(
        len(names),
        str(tmp_path),
        "t.log",
        ["printf", "%s\\n", *torchrun],
        elastic=elastic,
        expendable=names[-1:] if elastic else (),
        plan=node_plan(nodes, addrs),
    )
    task = argv[argv.index("-c") - 1 :]
    out = {}
    for name in names:
        done = subprocess.run(
            task, capture_output=True, text=True, env={**os.environ, "SLURMD_NODENAME": name}
        )
        assert done.returncode == 0, done.stderr
        out[name] = done.stdout.splitlines()
    return out


@pytest.mark.parametrize("count", [1, 2, 4])
def test_only_node_0_hosts_the_store_and_each_node_announces_its_own_address(tmp_path, count):
    names = [f"gpu-{i:02d}" for i in range(count)]
    # not the names: torch cannot match them to a host name
    addrs = [f"10.9.0.{11 + i}" for i in range(count)]
    got = each_nodes_argv(tmp_path, names, addrs)
    for i, name in enumerate(names):
        words = got[name]
        assert f"--rdzv-conf=join_timeout=120,is_host={int(i == 0)}" in words, words
        assert f"--local-addr={addrs[i]}" in words and "--rdzv-endpoint=10.9.0.11:29400" in words
        assert not [w for w in words if "@CARDTIME_" in w]  # every mark filled in
        # the log's line
        assert words[-3:] == ["suite.workloads.x", "--a", "1"] and words[0].startswith("$ printf")
        # the rest: one argv
        assert [w for w in words if "is_host" not in w and "--local-addr" not in w] == [
            w for w in got[names[0]] if "is_host" not in w and "--local-addr" not in w
        ]


def test_the_elastic_launch_fills_the_marks_too_and_a_node_outside_the_plan_hosts_nothing(tmp_path):
    got = each_nodes_argv(tmp_path, ["a", "b"], ["10.9.0.1", "10.9.0.2"], elastic=True)
    assert "--rdzv-conf=join_timeout=120,is_host=1" in got["a"] and "--local-addr=10.9.0.2" in got["b"]
    assert "--nnodes=1:2" in got["b"] and "--rdzv-conf=join_timeout=120,is_host=0" in got["b"]
    nodes = parse_nodes(["a", "b"])
    argv = srun_launch_command(
        2,
        str(tmp_path),
        "t.log",
        ["printf", "%s\\n", f"--local-addr={NODE_ADDR_MARK}", f"is_host={IS_HOST_MARK}"],
        plan=node_plan(nodes, ["10.9.0.1", "10.9.0.2"]),
    )
    # a node the plan does not name
    done = subprocess.run(
        argv[argv.index("-c") - 1 :],
        capture_output=True,
        text=True,
        env={**os.environ, "SLURMD_NODENAME": "c"},
    )
    assert done.stdout.splitlines() == [
        "$ printf %s\\n --local-addr=c is_host=0",
        "--local-addr=c",
        "is_host=0",
    ]


def test_node_addrs_come_from_slurmctlds_nodeaddr():
    shown = (DATA / "scontrol-o-show-node.txt").read_text()  # captured: README.md beside it
    assert parse_node_addrs_shown(shown) == {"node-a": "10.176.149.1", "node-b": "10.176.149.2"}
    assert parse_node_addrs_shown("") == {}
    assert (
        node_plan(parse_nodes(["node-a", "node-b"]), ["10.176.149.1", ""])
        == "node-a=10.176.149.1,node-b=node-b"
    )


def test_without_scontrol_each_node_keeps_its_name(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    assert slurm_node_addrs(["gpu-01", "gpu-02"]) == ("gpu-01", "gpu-02")


def test_the_connection_check_each_node_runs_says_which_node_reached_the_port():
    """connect_argv's per-node shell, run by sh here as a node's task: a listening port and a closed one."""
    with socket.socket() as listening, socket.socket() as closed:
        listening.bind(("127.0.0.1", 0))
        listening.listen(4)
        closed.bind(("127.0.0.1", 0))  # bound, not listening: connections refused
        said = {}
        for node, sock in (("gpu-01", listening), ("gpu-02", closed)):
            argv = connect_argv(2, f"127.0.0.1:{sock.getsockname()[1]}", ["--container-image=img"])
            assert (
                argv[:6]
                == [
                    "srun",
                    "--nodes=2",
                    "--ntasks=2",
                    "--ntasks-per-node=1",
                    "--kill-on-bad-exit=0",
                    "--export=ALL",
                ]
                and argv[6] == "--container-image=img"
            )
            done = subprocess.run(
                argv[argv.index("sh") :],
                capture_output=True,
                text=True,
                env={**os.environ, "SLURMD_NODENAME": node},
            )
            said.update(results_by_target(done.stdout + "srun: a line of srun's own\n"))
        assert len(said) == 2 and list(said["gpu-01"].values()) == [""]
        assert "refused" in next(iter(said["gpu-02"].values())).lower()
        # the rendezvous port and the kernel-picked one in one task: each answer kept by its target
        good, bad = (f"127.0.0.1:{s.getsockname()[1]}" for s in (listening, closed))
        argv = connect_argv(2, good, also=[bad])
        assert argv[-2:] == [good, bad]
        done = subprocess.run(
            argv[argv.index("sh") :],
            capture_output=True,
            text=True,
            env={**os.environ, "SLURMD_NODENAME": "n1"},
        )
    both = results_by_target(done.stdout)
    assert both["n1"][good] == "" and "refused" in both["n1"][bad].lower()


@pytest.mark.parametrize("count", [1, 2, 4])
def test_the_batch_script_passes_node_addrs_on_and_refuses_a_count_that_differs(count):
    addrs = ",".join(f"10.9.0.{i + 1}" for i in range(count))
    script = sbatch_script(
        checkout="/c",
        python="/v/bin/python",
        nodes=count,
        gpus_per_node=1,
        partition="debug",
        profile="gloo-cpu",
        gpus=False,
        node_addrs=addrs,
    )
    run = next(line for line in script.splitlines() if " -m suite run " in line)
    assert f"#SBATCH --nodes={count}\n" in script and f"--node-addrs {addrs} " in run
    assert "--node-addrs" not in sbatch_script(
        checkout="/c",
        python="p",
        nodes=count,
        gpus_per_node=1,
        partition="debug",
        profile="gloo-cpu",
        gpus=False,
    )
    with pytest.raises(ValueError, match=f"NODE_ADDRS= names {count + 1} addresses for NODES={count}"):
        sbatch_script(
            checkout="/c",
            python="p",
            nodes=count,
            gpus_per_node=1,
            partition="debug",
            gpus=False,
            node_addrs=addrs + ",10.9.0.99",
        )
    with pytest.raises(ValueError, match="NODE_ADDRS='10.9.0.1;reboot' cannot go into the batch script"):
        sbatch_script(
            checkout="/c",
            python="p",
            nodes=1,
            gpus_per_node=1,
            partition="debug",
            gpus=False,
            node_addrs="10.9.0.1;reboot",
        )
