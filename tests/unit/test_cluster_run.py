"""make remote HOSTS= (provisioning/group.py, drive.py): the pure parts — what is refused before anything is
shipped, the run's arguments, the job's key — on probe outputs built from real captures
(test_cluster_preflight.facts)."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

from provisioning.cluster.node_lines import suite_node_args
from provisioning.group import (
    Member,
    NodeRunSettings,
    base_problems,
    nodes_runtime,
    reach_problem,
    runtime_problem,
)
from provisioning.job import jobs
from provisioning.session import preflight
from provisioning.session.hosts import parse_host
from provisioning.session.options import RemoteOptions
from suite.cluster.multinode import parse_node

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_cluster_preflight import facts  # noqa: E402


def probed(label: str, **changes) -> Member:
    f = facts(**changes)
    return Member(parse_host(label), f, preflight.Decision("host", []))


def test_the_nodes_must_share_the_remote_folder():
    nodes = [
        probed("root@a", base="/root/cardtime"),
        probed("root@b", base="/root/cardtime"),
        probed("ubuntu@c", base="/home/ubuntu/cardtime"),
    ]
    assert base_problems(nodes) == [
        "node ubuntu@c: remote folder /home/ubuntu/cardtime where root@a has "
        "/root/cardtime: pass REMOTE_DIR=<one absolute path> that every node can create"
    ]
    assert base_problems(nodes[:2]) == []


def test_a_node_the_first_cannot_reach_names_both_and_the_fix():
    node = parse_node("root@gpu-b")
    keys = reach_problem("root@gpu-a", node, "root@gpu-b: Permission denied (publickey).", "")
    assert keys == (
        "node root@gpu-a cannot reach node gpu-b over ssh without a password (root@gpu-b: Permission "
        "denied (publickey).): on root@gpu-a make a key (ssh-keygen -t ed25519) and add its .pub to "
        "root@gpu-b's ~/.ssh/authorized_keys (ssh-copy-id), or pass NODE_SSH_CONFIG="
    )
    host_key = reach_problem("root@gpu-a", node, "Host key verification failed.", "/etc/cluster_ssh")
    assert host_key.endswith(": accept its host key once on root@gpu-a: ssh root@gpu-b true")


def test_the_runtime_across_nodes():
    opts = RemoteOptions(host=parse_host("root@a"))
    assert (
        nodes_runtime(opts) == "host" and nodes_runtime(dataclasses.replace(opts, runtime="host")) == "host"
    )
    assert nodes_runtime(dataclasses.replace(opts, runtime="docker")) == "docker"
    assert nodes_runtime(dataclasses.replace(opts, image="registry/cardtime:cu130")) == "docker"
    assert runtime_problem(opts) is None and runtime_problem(dataclasses.replace(opts, image="r/c:t")) is None
    assert runtime_problem(dataclasses.replace(opts, image="r/c:t", runtime="host")) == (
        "IMAGE=r/c:t runs in Docker but RUNTIME=host was asked: drop one of them"
    )


def test_docker_across_nodes_takes_ordinary_logins_of_one_uid():
    from provisioning.group import login_problems

    ubuntu = [probed("ubuntu@a", uid=1000, gid=1000), probed("ubuntu@b", uid=1000, gid=1000)]
    assert login_problems(ubuntu, "docker") == [] and login_problems(ubuntu, "host") == []
    mixed = [probed("root@a", uid=0, gid=0), probed("ubuntu@b", uid=1000, gid=1000)]
    assert login_problems(mixed, "host") == []
    assert login_problems(mixed, "docker") == [
        "node ubuntu@b: RUNTIME=docker across nodes runs every node's container as root@a's uid:gid 0:0, but "
        "this "
        "login is 1000:1000: log in with the same user on every node (HOSTS=user@…), or use RUNTIME=host"
    ]


def test_the_hosts_pythons_need_not_agree_in_docker():
    from provisioning.cluster.nodes import cluster_problems

    nodes = [("root@a", facts()), ("root@b", facts(python=(3, 12, 1)))]
    assert cluster_problems(nodes, "host") == [
        "node root@b: Python 3.12 where root@a has 3.11: the same venv must "
        "run on every node; install the same Python, or use RUNTIME=docker"
    ]
    assert cluster_problems(nodes, "docker") == []


def test_the_suites_node_arguments():
    assert suite_node_args(["root@a", "root@b:2222"], NodeRunSettings()) == ["--nodes", "root@a,root@b:2222"]
    # --nproc comes with suite_args, from the GPUs preflight counted and NPROC= (tests/unit/test_world.py)
    assert suite_node_args(["a", "b"], NodeRunSettings(ssh_config="/c", socket_ifname="ens5", nproc=8)) == [
        "--nodes",
        "a,b",
        "--ssh-config",
        "/c",
        "--socket-ifname",
        "ens5",
    ]


def test_the_job_key_holds_the_nodes_and_still_matches_older_single_host_jobs():
    single = jobs.JobKey(commit="c" * 40, profile="nccl-gpu", stages="", runtime="host")
    multi = dataclasses.replace(single, nodes="root@a,root@b")
    # job.json before nodes
    older = {
        "commit": "c" * 40,
        "profile": "nccl-gpu",
        "stages": "",
        "runtime": "host",
    }
    assert single.matches(older) and not multi.matches(older)
    assert multi.matches({**older, "nodes": "root@a,root@b"}) and not single.matches(
        {**older, "nodes": "root@a,root@b"}
    )


def test_a_node_whose_set_up_cannot_run_ends_the_set_up_naming_it(tmp_path):
    """The first node's set-up lines for the others, run for real by sh: a node that ssh cannot reach (an
    unresolvable name: ssh fails at once) makes the set-up exit 2 naming it, its ssh error shown prefixed."""
    import subprocess

    from provisioning.cluster.node_lines import other_nodes_setup

    nodes = [parse_node("root@nosuch-b.invalid"), parse_node("root@nosuch-c.invalid")]
    done = subprocess.run(
        ["sh", "-c", "set -e\n" + other_nodes_setup(str(tmp_path), nodes, "")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert (
        lines[-1] == "set-up FAILED on node(s) nosuch-b.invalid nosuch-c.invalid: see the [node] lines above"
    )
    assert any(line.startswith("[nosuch-b.invalid] ssh: Could not resolve hostname") for line in lines)
    assert (tmp_path / "setup-nosuch-c.invalid.log").exists() and not (tmp_path / "refused").exists()
