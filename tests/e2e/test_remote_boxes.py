"""Preflight and the pre-run torch check over a real sshd on 127.0.0.1 (no venv, no run: seconds).

What a rented box's non-interactive SSH session shows the probe (issue 20): every Python it can
find with its absolute path, the login's uid/gid (the container's --user), /dev/shm's size; and
the torch check run in a real interpreter over SSH refuses, in one line, a torch that cannot use
the GPUs nvidia-smi listed (this venv's CPU torch stands in for a CUDA line the driver cannot run).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from remote_loopback import sshd_available, start_sshd  # noqa: E402

from provisioning import cuda_check  # noqa: E402
from provisioning.connection import Remote, RemoteError  # noqa: E402
from provisioning.hosts import parse_host  # noqa: E402
from provisioning.remote import RemoteOptions, Steps, run_preflight  # noqa: E402

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(not sshd_available(), reason="needs openssh-server (.ci/run installs it)")]
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def remote(tmp_path_factory):
    folder = tmp_path_factory.mktemp("sshd-boxes")
    server = start_sshd(folder)
    known = folder / "known_hosts_client"
    known.write_text(server.known_hosts_line())
    r = Remote.open(parse_host(server.host), key=str(server.client_key), known_hosts=known)
    yield r
    r.close()
    server.stop()


def test_preflight_over_ssh_sees_pythons_ids_and_shm(remote, tmp_path):
    opts = RemoteOptions(host=remote.spec, profile="gloo-cpu", runtime="host", remote_dir=str(tmp_path / "host"))
    facts, decision = run_preflight(remote, opts, Steps(open(os.devnull, "w")))
    assert decision.problems == [] and decision.cuda_line is None  # a CPU profile installs pip's own torch
    assert facts.pythons and all(exe.startswith("/") for exe, _, _ in facts.pythons), facts.pythons
    assert facts.python >= (3, 11) and facts.python_exe.startswith("/")
    assert (facts.uid, facts.gid) == (os.getuid(), os.getgid())  # sshd logs in as this machine's user
    stat = os.statvfs("/dev/shm")
    assert facts.shm_bytes == stat.f_blocks * stat.f_frsize


def test_torch_that_cannot_use_the_gpus_is_refused_before_the_run(remote):
    python = str(ROOT / ".venv" / "bin" / "python")  # torch 2.13.0+cpu: no CUDA at all
    with pytest.raises(RemoteError) as e:
        cuda_check.check_host_python(remote, python, gpus_seen=8, driver="550.54.15")
    what = e.value.what
    assert "\n" not in what and "is a CPU build" in what and python in what
