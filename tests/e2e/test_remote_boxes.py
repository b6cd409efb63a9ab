"""Preflight and the pre-run torch check over a real sshd on 127.0.0.1 (no venv, no run: seconds).

What a rented box's non-interactive SSH session shows the probe (issue 20): every Python it can
find with its absolute path, the login's uid/gid (the container's --user), /dev/shm's size; and
the job's torch check, run in a real interpreter over SSH, refuses in one line a torch that cannot
use the GPUs nvidia-smi listed (this venv's CPU torch stands in for a CUDA line the driver cannot run).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from remote_loopback import sshd_available, start_sshd  # noqa: E402

from provisioning import cuda_check_host  # noqa: E402
from provisioning.runtime import cuda_check  # noqa: E402
from provisioning.session.connection import Remote  # noqa: E402
from provisioning.session.hosts import parse_host  # noqa: E402
from provisioning.session.login import run_preflight  # noqa: E402
from provisioning.session.options import RemoteOptions  # noqa: E402
from provisioning.session.shell import quote  # noqa: E402
from provisioning.session.steps import Steps  # noqa: E402

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.needs("sshd"),
    pytest.mark.skipif(not sshd_available(), reason="needs openssh-server (.ci/run installs it)"),
]
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
    opts = RemoteOptions(
        host=remote.spec, profile="gloo-cpu", runtime="host", remote_dir=str(tmp_path / "host")
    )
    facts, decision = run_preflight(remote, opts, Steps(open(os.devnull, "w")))
    assert decision.problems == [] and decision.cuda_line is None  # a CPU profile installs pip's own torch
    assert facts.pythons and all(exe.startswith("/") for exe, _, _ in facts.pythons), facts.pythons
    assert facts.python >= (3, 11) and facts.python_exe.startswith("/")
    assert (facts.uid, facts.gid) == (os.getuid(), os.getgid())  # sshd logs in as this machine's user
    stat = os.statvfs("/dev/shm")
    assert facts.shm_bytes == stat.f_blocks * stat.f_frsize


def test_torch_that_cannot_use_the_gpus_is_refused_before_the_run(remote, tmp_path):
    """The job's GPU check step, run over SSH as the job runs it after set-up: the host program's
    text by `python -c` (nothing of the suite on its path), this venv's CPU torch refused in one
    line kept in jobs/<id>/refused, exit 2."""
    python = str(ROOT / ".venv" / "bin" / "python")  # torch 2.13.0+cpu: no CUDA at all
    job_dir = tmp_path / "job"
    job_dir.mkdir()
    step = cuda_check.job_step(
        cuda_check.host_python_argv(python, gpus_seen=8, driver="550.54.15"), str(job_dir)
    )
    r = remote.run(f"cd {quote(str(tmp_path))} && env -i PATH=/usr/bin:/bin sh -c {quote(step)}", check=False)
    assert r.exit_code == 2, r.stdout + r.stderr
    refused = (job_dir / "refused").read_text().strip()
    assert "\n" not in refused and "is a CPU build" in refused and python in refused
    assert cuda_check_host.REFUSED + refused in r.stdout
