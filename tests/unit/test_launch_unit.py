"""Command lines, environment and the port trap, without launching anything."""

import os
import socket

import pytest

from suite.config import GLOO_CPU, NCCL_GPU
from suite.launch.torchrun import LaunchError, choose_port, port_holder, torchrun_command, worker_env


def test_torchrun_command_for_the_rehearsal():
    cmd = torchrun_command(GLOO_CPU, "suite.workloads.x", ["--a", "1"], port=29999)
    assert cmd[1:3] == ["-m", "torch.distributed.run"]
    assert "--nproc-per-node=4" in cmd and "--master-addr=127.0.0.1" in cmd and "--master-port=29999" in cmd
    assert cmd[-4:] == ["-m", "suite.workloads.x", "--a", "1"]


def test_worker_env_caps_threads_and_pins_loopback():
    env = worker_env(GLOO_CPU, base={"PATH": "/bin"})
    assert env["OMP_NUM_THREADS"] == "1" and env["GLOO_SOCKET_IFNAME"] == "lo"
    gpu = worker_env(NCCL_GPU, base={})
    assert "GLOO_SOCKET_IFNAME" not in gpu
    # torch's own default (3) is what a production job runs under: nothing forces another setting
    assert "TORCH_NCCL_ASYNC_ERROR_HANDLING" not in gpu
    assert gpu["OMP_NUM_THREADS"] == "8" and gpu["CARDTIME_DEVICE"] == "cuda"


def test_a_held_port_is_named_with_its_holder():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        assert port_holder(port) == f"pid {os.getpid()} ({open('/proc/self/comm').read().strip()})"
        with pytest.raises(
            LaunchError, match=f"port {port} on 127.0.0.1 is held by pid {os.getpid()}.*--master-port"
        ):
            choose_port(GLOO_CPU.with_overrides(master_port=port))
    assert choose_port(GLOO_CPU.with_overrides(master_port=port)) == port  # free again


def test_free_port_when_none_is_fixed():
    assert 0 < choose_port(GLOO_CPU) < 65536


def test_a_launch_on_the_first_node_alone_leaves_the_rendezvous_port_to_the_nodes():
    """A multi-node run's fixed port (29400) is the rendezvous's across the nodes; launches on one node at
    once (the fault stage's concurrent drills) each take a free port, even while the fixed one is held."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        nodes = GLOO_CPU.with_overrides(nodes=("node-a", "node-b"), master_port=port)
        chosen = {choose_port(nodes) for _ in range(3)}
    assert port not in chosen and all(0 < p < 65536 for p in chosen)
