"""RUNTIME=docker on a host with /dev/infiniband (provisioning/runtime/suite_container.py, preflight's
`infiniband` section): the devices and IPC_LOCK passed in, so that NCCL's IB transport can open the HCA and
register memory."""

from __future__ import annotations

import subprocess

from provisioning.cluster.image import first_node_run_argv
from provisioning.runtime import remote_docker, suite_container
from provisioning.session import preflight
from provisioning.session.connection import sh_command


def test_the_probe_reads_dev_infiniband_in_a_real_shell(tmp_path):
    out = subprocess.run(
        ["sh", "-c", sh_command(preflight.probe_command(str(tmp_path / "base")))],
        capture_output=True,
        text=True,
    ).stdout
    assert "@@infiniband" in out
    facts = preflight.parse_probe(out)
    import os

    assert facts.rdma_devices == (
        sorted(os.listdir("/dev/infiniband")) if os.path.isdir("/dev/infiniband") else []
    )
    listed = preflight.parse_probe("@@infiniband\nrdma_cm\nuverbs0\nuverbs1\n@@rc 0\n")
    assert listed.rdma_devices == ["rdma_cm", "uverbs0", "uverbs1"]


def test_rdma_flags_on_gpu_runs_only():
    flags = suite_container.RunSettings(gpus=True, rdma=True).docker_flags()
    assert "--device=/dev/infiniband" in flags and "--cap-add=IPC_LOCK" in flags and "memlock=-1" in flags
    kwargs = suite_container.RunSettings(gpus=True, rdma=True).sdk_create_kwargs()
    assert kwargs["devices"] == ["/dev/infiniband:/dev/infiniband:rwm"] and kwargs["cap_add"] == ["IPC_LOCK"]
    assert "--device=/dev/infiniband" not in suite_container.RunSettings(gpus=True).docker_flags()
    one = remote_docker.run_argv(
        "img", job_id="j", job_dir="/j", runs_dir="/r", suite_args=[], gpus=True, rdma=True
    )
    cpu = remote_docker.run_argv(
        "img", job_id="j", job_dir="/j", runs_dir="/r", suite_args=[], gpus=False, rdma=True
    )
    assert "--device=/dev/infiniband" in one and "--device=/dev/infiniband" not in cpu
    nodes = first_node_run_argv(
        "img",
        [],
        job_id="j",
        runs_dir="/r",
        job_dir="/j",
        home="/root",
        ssh_config="",
        gpus=True,
        user=None,
        rdma=True,
    )
    assert "--device=/dev/infiniband" in nodes
    prefix_env = next(w for w in nodes if w.startswith("CARDTIME_NODE_CONTAINER="))
    assert "--device=/dev/infiniband" in prefix_env  # every other node's container too


def test_a_python_the_user_installed_under_local_bin_is_found(tmp_path):
    """An old host (Ubuntu 22.04: Python 3.10) with a newer Python in ~/.local/bin (`uv python install 3.11`,
    which links python3.11 there, off a non-interactive session's PATH): the probe, run for real, finds it."""
    import os
    import sys

    home = tmp_path / "home"
    (home / ".local" / "bin").mkdir(parents=True)
    (home / ".local" / "bin" / "python3.11").symlink_to(sys.executable)
    out = subprocess.run(
        ["sh", "-c", sh_command(preflight.probe_command(str(tmp_path / "base")))],
        capture_output=True,
        text=True,
        env={**os.environ, "HOME": str(home), "PATH": "/usr/bin:/bin"},
    ).stdout
    found = [exe for exe, _, _ in preflight.parse_probe(out).pythons]
    assert any(exe.startswith(str(home)) for exe in found), found
