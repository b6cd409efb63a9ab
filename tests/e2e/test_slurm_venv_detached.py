"""make slurm SLURM_HOST=…'s venv install as a detached job under the host's lock
(provisioning/slurm/venv.py), over a real sshd on 127.0.0.1. The install is a real POSIX set-up that keeps
ENSURE_VENV's contract (the ready mark last) and waits for a go-file, so the test decides when it ends: the
laptop drops while it runs, a rerun follows the same job instead of starting a second (the orphan is the only
installer), the lock is given back at its end, and a third call finds the venv ready without any job."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from remote_loopback import sshd_available, start_sshd  # noqa: E402

from provisioning.job import jobs  # noqa: E402
from provisioning.session.connection import Remote  # noqa: E402
from provisioning.session.hosts import parse_host  # noqa: E402
from provisioning.slurm import venv as slurm_venv  # noqa: E402

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.needs("sshd"),
    pytest.mark.skipif(not sshd_available(), reason="needs openssh-server"),
]

INSTALL = """set -e
echo "creating the venv {venv}"
echo started >> {base}/installs
while [ ! -f {base}/go ]; do sleep 0.2; done
mkdir -p {venv}
: > {venv}/.cardtime-ready
echo "venv {venv} ready"
"""


def open_remote(sshd, tmp_path: Path) -> Remote:
    kh = tmp_path / "known_hosts"
    kh.write_text(sshd.known_hosts_line())
    return Remote.open(parse_host(sshd.host), key=str(sshd.client_key), known_hosts=kh)


def test_a_dropped_laptop_leaves_one_install_that_a_rerun_follows(tmp_path):
    sshd = start_sshd(tmp_path / "sshd")
    base, venv = tmp_path / "base", tmp_path / "base" / "venvs" / "v1"
    base.mkdir()
    script = INSTALL.format(base=base, venv=venv)
    try:
        first = open_remote(sshd, tmp_path)
        job_id = slurm_venv.start_install(first, str(base), str(venv), script, str(tmp_path), "c" * 40)
        first.close()  # the laptop drops while pip runs
        said: list[str] = []

        def say(line: str) -> None:  # the install may end once the rerun follows it
            said.append(line)
            if line.startswith("an install of"):
                (base / "go").write_text("")

        again = open_remote(sshd, tmp_path)
        assert slurm_venv.running_install(again, str(base), str(venv)) == job_id
        started = time.monotonic()
        slurm_venv.install_detached(
            again, str(base), str(venv), script, str(tmp_path), "c" * 40, say, poll_s=0.5
        )
        followed_s = time.monotonic() - started
        st = jobs.status(again, str(base), job_id=job_id)
        third: list[str] = []
        slurm_venv.install_detached(
            again, str(base), str(venv), script, str(tmp_path), "c" * 40, third.append
        )
        again.close()
    finally:
        sshd.stop()
    print(f"rerun followed the detached install for {followed_s:.1f} s")
    assert said[0] == f"an install of {venv} started before still runs (job {job_id}): following it"
    assert f"venv {venv} ready" in said and (venv / ".cardtime-ready").exists()
    assert (base / "installs").read_text() == "started\n"  # one installer: the rerun started none
    assert st.state == "finished" and st.exit_code == 0
    assert not (base / "jobs" / "lock").exists()  # the job gave the host's lock back at its end
    assert third == [f"venv {venv} reused"] and len(list((base / "jobs").glob("venv-*"))) == 1
