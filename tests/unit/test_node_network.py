"""Node addresses, the fixed rendezvous port and the connection preflight (suite/cluster/node_addrs.py,
suite/cluster/node_ports.py); the NAT'd, firewalled lab they are made for:
tests/e2e/test_two_nodes_hostile.py."""

from __future__ import annotations

import socket

import pytest

from provisioning.cluster.addrs import master_port_arg, node_addrs_arg
from provisioning.cluster.node_lines import suite_node_args
from provisioning.group import NodeRunSettings
from suite.cluster.multinode import NodesError, parse_nodes, read_hostfile, torchrun_node_command
from suite.cluster.node_addrs import (
    DEFAULT_RDZV_PORT,
    hostfile_node_addrs,
    local_route_source,
    parse_node_addrs,
    rendezvous_plan,
    rendezvous_port,
    route_source,
)
from suite.cluster.node_ports import CONNECT_PY, parse_connect_lines, refusal, targets_of

NODES = parse_nodes("ubuntu@54.1.2.3,ubuntu@54.1.2.4:2222,gpu-c")


def test_node_addrs_one_per_node_no_loopback():
    assert parse_node_addrs("10.0.0.1, 10.0.0.2,10.0.0.3", NODES) == ("10.0.0.1", "10.0.0.2", "10.0.0.3")
    for text, says in [
        ("10.0.0.1,10.0.0.2", "2 node addresses for 3 nodes"),
        ("10.0.0.1,127.0.1.1,10.0.0.3", "node 54.1.2.4: node address 127.0.1.1 is a loopback"),
        ("10.0.0.1,,10.0.0.3", "node address '' is not"),
    ]:
        with pytest.raises(NodesError) as e:
            parse_node_addrs(text, NODES)
        assert says in str(e.value) and "\n" not in str(e.value)


def test_hostfile_addr_column():
    text = "ubuntu@54.1.2.3 slots=8 addr=10.0.0.1\nubuntu@54.1.2.4 addr=10.0.0.2  # b\n"
    assert read_hostfile(text) == ("ubuntu@54.1.2.3", "ubuntu@54.1.2.4")
    assert hostfile_node_addrs(text) == ("10.0.0.1", "10.0.0.2")
    assert hostfile_node_addrs("a\nb slots=2\n") == ()
    with pytest.raises(NodesError, match="addr= on 1 of its 2 nodes"):
        hostfile_node_addrs("a addr=10.0.0.1\nb\n")


def test_route_source_from_ip_and_from_python():
    assert (
        route_source("10.0.0.7\n") == "10.0.0.7" and route_source("") is None and route_source("junk") is None
    )
    assert local_route_source("127.0.0.1") == "127.0.0.1"  # asked of this machine for real


def test_node_0_hosts_the_store_and_every_node_announces_its_address():
    endpoint, per_node = rendezvous_plan(NODES, ("10.0.0.1", "10.0.0.2", "10.0.0.3"), 29400)
    assert endpoint == "10.0.0.1:29400"
    assert per_node == [
        {"is_host": True, "local_addr": "10.0.0.1"},
        {"is_host": False, "local_addr": "10.0.0.2"},
        {"is_host": False, "local_addr": "10.0.0.3"},
    ]
    words = torchrun_node_command(
        "py", "m", [], nproc=2, nnodes=3, endpoint=endpoint, rdzv_id="r", **per_node[1]
    )
    assert "--rdzv-conf=join_timeout=120,is_host=0" in words and "--local-addr=10.0.0.2" in words
    assert "is_host" not in " ".join(
        torchrun_node_command("py", "m", [], nproc=1, nnodes=2, endpoint="a:1", rdzv_id="r")
    )
    assert rendezvous_plan(NODES, (), 29400)[0] == "54.1.2.3:29400"  # no addresses: the name, as before


def test_fixed_port_default_and_taken():
    assert DEFAULT_RDZV_PORT == 29400
    with socket.create_server(("0.0.0.0", 0)) as held:
        port = held.getsockname()[1]
        with pytest.raises(NodesError, match=f"the rendezvous port {port} is taken on this node"):
            rendezvous_port(port)
    assert rendezvous_port(port) == port  # free again


def test_what_each_node_must_reach():
    addrs = ("10.0.0.1", "10.0.0.2", "10.0.0.3")
    assert targets_of(0, NODES, addrs, 29400) == [(1, "10.0.0.2", 2222), (2, "10.0.0.3", 22)]
    assert targets_of(2, NODES, addrs, 29400) == [
        (0, "10.0.0.1", 29400),
        (0, "10.0.0.1", 22),
        (1, "10.0.0.2", 2222),
    ]
    # and the port node 0's kernel picked, as gloo's and NCCL's sockets will: every other node tries it
    assert targets_of(1, NODES, addrs, 29400, 41234)[:2] == [(0, "10.0.0.1", 29400), (0, "10.0.0.1", 41234)]
    assert (0, "10.0.0.1", 41234) not in targets_of(0, NODES, addrs, 29400, 41234)


def test_a_firewall_open_to_ssh_and_the_rendezvous_alone_is_named_with_what_to_open():
    line = refusal(NODES, 1, 0, "10.0.0.1", 41234, "timed out", 29400, 41234)
    assert line.startswith(
        "node 54.1.2.4 cannot connect to node 54.1.2.3 at 10.0.0.1:41234, a port the kernel picked as gloo's "
        "and NCCL's sockets use after the rendezvous (timed out)"
    )
    assert "not only 22 and 29400" in line and "security-group" in line and "\n" not in line
    low, high = open("/proc/sys/net/ipv4/ip_local_port_range").read().split()
    assert f"(here {low}–{high};" in line


def test_connect_lines_parsed_from_the_real_probe(tmp_path):
    """CONNECT_PY run for real against a port that listens and one that does not."""
    import subprocess
    import sys

    with socket.create_server(("127.0.0.1", 0)) as open_one, socket.socket() as closed_one:
        closed_one.bind(("127.0.0.1", 0))
        good, bad = (f"127.0.0.1:{s.getsockname()[1]}" for s in (open_one, closed_one))
        said = subprocess.run(
            [sys.executable, "-c", CONNECT_PY, good, bad], capture_output=True, text=True
        ).stdout
    results = parse_connect_lines(said)
    assert results[good] == "" and "refused" in results[bad].lower()


def test_refusal_is_one_line_naming_node_address_port_and_fix():
    line = refusal(NODES, 2, 0, "10.0.0.1", 29400, "timed out", 29400)
    assert line.startswith(
        "node gpu-c cannot connect to node 54.1.2.3 at 10.0.0.1:29400, the rendezvous port"
    )
    assert (
        "(timed out)" in line
        and "open TCP 29400 on it" in line
        and "MASTER_PORT=" in line
        and "\n" not in line
    )
    ssh_line = refusal(NODES, 0, 1, "10.0.0.2", 2222, "No route to host", 29400)
    assert (
        ", ssh (No route to host)" in ssh_line and "NODE_ADDRS=" in ssh_line and "MASTER_PORT" not in ssh_line
    )


def test_make_remote_passes_node_addrs_and_port(tmp_path):
    hostfile = tmp_path / "hosts"
    hostfile.write_text("ubuntu@a addr=10.0.0.1\nubuntu@b addr=10.0.0.2\n")
    assert node_addrs_arg("", str(hostfile)) == "10.0.0.1,10.0.0.2"
    assert node_addrs_arg(" 10.0.0.5,10.0.0.6", str(hostfile)) == "10.0.0.5,10.0.0.6"
    with pytest.raises(ValueError, match="NODE_ADDRS entry"):
        node_addrs_arg("10.0.0.1,bad addr", "")
    assert master_port_arg("") == 0 and master_port_arg("29500") == 29500
    with pytest.raises(ValueError, match="MASTER_PORT='x'"):
        master_port_arg("x")
    args = suite_node_args(["a", "b"], NodeRunSettings(node_addrs="10.0.0.1,10.0.0.2", master_port=29500))
    assert args[-4:] == ["--node-addrs", "10.0.0.1,10.0.0.2", "--master-port", "29500"]


def test_make_remotes_node_addrs_and_master_port_reach_the_nodes_settings(tmp_path):
    """NODE_ADDRS= and MASTER_PORT= as make remote passes them, through the real parser to the settings every
    node gets; a bad one refused on the laptop, before any node is reached (options() connects to nothing)."""
    from provisioning.__main__ import build_parser
    from provisioning.remote import options

    hostfile = tmp_path / "hosts"
    hostfile.write_text("ubuntu@a addr=10.0.0.1\nubuntu@b addr=10.0.0.2\n")

    def settings(*flags):
        return options(
            build_parser().parse_args(["remote", "--host", "", "--hosts", "ubuntu@a,ubuntu@b", *flags])
        ).nodes_run

    given = settings("--node-addrs", "10.9.0.1,10.9.0.2", "--master-port", "29555")
    assert (given.node_addrs, given.master_port) == ("10.9.0.1,10.9.0.2", 29555)
    assert (settings().node_addrs, settings().master_port) == ("", 0)  # asked of the nodes; the default port
    from_file = options(
        build_parser().parse_args(["remote", "--host", "", "--hostfile", str(hostfile)])
    ).nodes_run
    assert from_file.node_addrs == "10.0.0.1,10.0.0.2"
    with pytest.raises(ValueError, match="MASTER_PORT='70000' is not a port"):
        settings("--master-port", "70000")
    with pytest.raises(ValueError, match="NODE_ADDRS entry 'bad addr'"):
        settings("--node-addrs", "10.9.0.1,bad addr")


def test_elastic_srun_keeps_the_survivors_and_forgives_the_lost_node(tmp_path):
    """The elastic per-node wrapper run for real by sh as each node would: --kill-on-bad-exit=0; the
    expendable node's SIGKILLed torchrun (a shell killing itself, as the drill's agent is killed) exits 0,
    another node's failure keeps its code."""
    import os
    import subprocess

    from suite.cluster.slurm import srun_launch_command

    argv = srun_launch_command(
        2, str(tmp_path), "t.log", ["sh", "-c", "kill -9 $$"], elastic=True, expendable=["gpu-b"]
    )
    assert "--kill-on-bad-exit=0" in argv and "--kill-on-bad-exit=1" not in argv
    task = argv[argv.index("sh") :]
    for node, code in (("gpu-b", 0), ("gpu-a", 137)):
        done = subprocess.run(
            task, capture_output=True, text=True, env={**os.environ, "SLURMD_NODENAME": node}
        )
        assert done.returncode == code and (tmp_path / node).is_dir(), (node, done)


def test_node_addrs_survive_the_manifest_for_resume():
    import json

    from suite.config import GLOO_CPU, profile_from_dict

    two = GLOO_CPU.with_overrides(
        nproc=1, degrees=(1,), nodes=("a", "b"), node_addrs=("10.0.0.1", "10.0.0.2"), master_port=29400
    )
    assert profile_from_dict(json.loads(json.dumps(two.to_dict()))) == two


def test_mpirun_logins_are_tried_at_the_node_addresses_as_mpirun_will(tmp_path, monkeypatch):
    """The ssh argv is mpirun's own rsh agent (suite/cluster/mpirun.py) at each other node's address; a node
    reached by the same name as its address is not tried again; a refusal names node, address, command and
    fix. A stand-in ssh refuses one address as a known_hosts without it would."""
    from suite.cluster.mpirun import rsh_agent
    from suite.cluster.mpirun_reach import check_mpirun_reach, mpirun_logins

    nodes = parse_nodes("ubuntu@gpu-a,ubuntu@gpu-b,ubuntu@10.0.0.3")
    addrs = ("10.0.0.1", "10.0.0.2", "10.0.0.3")
    logins = mpirun_logins(nodes, addrs, "/etc/cardtime/ssh_config")
    assert logins == [(1, [*rsh_agent(nodes, "/etc/cardtime/ssh_config").split(), "10.0.0.2", "true"])]
    assert mpirun_logins(nodes, (), "") == []
    fake = tmp_path / "ssh"
    fake.write_text(
        '#!/bin/sh\nfor a in "$@"; do last2=$last; last=$a; done\n'
        'case "$last2" in 10.0.0.2) echo "Host key verification failed." >&2; exit 255 ;; esac\nexit 0\n'
    )
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    with pytest.raises(NodesError) as e:
        check_mpirun_reach(nodes, addrs)
    line = str(e.value)
    assert line.startswith("node gpu-a cannot log in to node gpu-b at 10.0.0.2 as mpirun will (`ssh -o ")
    assert "Host key verification failed." in line and "HostKeyAlias gpu-b" in line and "\n" not in line
    check_mpirun_reach(nodes, ("10.0.0.1", "10.0.0.9", "10.0.0.3"))  # every address answers: nothing raised
