"""`make remote` on a box that looks like a container pod (issue 20's "Done means"), over a real sshd.

The pod: no docker, no git, no tmux and no python3 on the SSH session's PATH (a folder of symlinks
to only the tools the path needs), and Python 3.11 only under a conda-like prefix
`<tmp>/opt/conda/bin` that is not on the session's PATH but is on the PATH of the container's
pid 1: sshd runs in its own PID namespace under a pid 1 whose environment is the image's, as on a
pod, so the probe, and the host-side status, lock and listing programs, can find it only through
/proc/1/environ. RUNTIME=host PROFILE=gloo-cpu
STAGES=topology: one run. Where the remote tests' venv cache (remote_loopback.host_venv_cache, filled by
test_remote_loopback, earlier in a whole session) holds this pyproject's venv, the pod's host reuses it;
else the venv is installed for real in the pod's own folder (never into the cache: this venv's Python is a
link under this test's temporary folder). Either way the job's set-up is handed the conda Python.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from remote_loopback import (  # noqa: E402
    clean_env,
    host_venv_cache,
    make_repo,
    sandbox_bin,
    sshd_available,
    start_sshd,
)

from provisioning.runtime import hostruntime  # noqa: E402

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.needs("sshd"),
    pytest.mark.timeout(2400),
    pytest.mark.skipif(
        not sshd_available() or not shutil.which("unshare"),
        reason="needs openssh-server and unshare (util-linux)",
    ),
]
ROOT = Path(__file__).resolve().parents[2]
VENV = ROOT / ".venv"
PY311 = Path("/usr/bin/python3.11")

ABSENT = ("git", "tmux", "docker", "python3.11", "python3")


@pytest.mark.skipif(
    not PY311.exists(), reason="needs /usr/bin/python3.11 to stand for the image's conda Python"
)
def test_make_remote_on_a_container_pod_runs_to_a_fetched_report(tmp_path):
    session_bin = sandbox_bin(tmp_path / "pod-bin")
    conda_bin = tmp_path / "opt" / "conda" / "bin"
    conda_bin.mkdir(parents=True)
    (conda_bin / "python3.11").symlink_to(PY311)
    (conda_bin / "python3").symlink_to("python3.11")
    image_env = {"PATH": f"{conda_bin}:{session_bin}", "NCCL_DEBUG": "WARN", "HOME": "/root"}
    sshd = start_sshd(tmp_path / "sshd", path_only=session_bin, pid1_env=image_env)
    repo = make_repo(tmp_path / "laptop")
    remote_dir = tmp_path / "host" / "cardtime"
    remote_dir.mkdir(parents=True)
    cached = host_venv_cache() / f"{hostruntime.pyproject_key(repo, 'HEAD')}-py3.11"
    if (cached / ".cardtime-ready").exists():  # the host keeps its venvs; so do the tests
        (remote_dir / "venvs").symlink_to(cached.parent)
    try:
        from provisioning.session.connection import Remote
        from provisioning.session.hosts import parse_host

        kh = tmp_path / "known_hosts"
        kh.write_text(sshd.known_hosts_line())
        r = Remote.open(parse_host(sshd.host), key=str(sshd.client_key), known_hosts=kh)
        try:
            for tool in ABSENT:  # the pod as the session sees it
                got = r.run(f"command -v {tool}", check=False)
                assert got.exit_code != 0, f"{tool} is on the session's PATH: {got.stdout}"
            pid1 = r.run("tr '\\0' '\\n' </proc/1/environ", check=False).stdout
            assert f"PATH={conda_bin}:" in pid1, pid1  # the image's PATH, reachable only there
        finally:
            r.close()

        args = [
            "make",
            "--no-print-directory",
            "-C",
            str(repo),
            "remote",
            f"VENV={VENV}",
            "-o",
            f"{VENV}/.installed",  # this checkout's venv on the laptop; never rebuilt
            f"HOST={sshd.host}",
            f"KEY={sshd.client_key}",
            f"KNOWN_HOSTS={kh}",
            f"REMOTE_DIR={remote_dir}",
            "RUNTIME=host",
            "PROFILE=gloo-cpu",
            "STAGES=topology",
        ]
        done = subprocess.run(args, env=clean_env(), capture_output=True, text=True, timeout=2000)
        out = done.stdout + done.stderr
        assert f"{conda_bin}/python3.11" in out, out  # preflight found the conda Python through pid 1's PATH

        remote_runs = (
            [p for p in (remote_dir / "runs").iterdir() if p.is_dir()]
            if (remote_dir / "runs").is_dir()
            else []
        )
        assert len(remote_runs) == 1, out
        local_run = repo / "runs" / remote_runs[0].name
        verdicts = json.loads((local_run / "verdicts.json").read_text())["verdicts"]
        assert verdicts, out
        assert done.returncode == (1 if any(v["status"] == "fail" for v in verdicts) else 0), out
        assert (local_run / "report.html").is_file(), out
        manifest = json.loads((local_run / "manifest.json").read_text())
        stages = manifest.get("stages", {})
        topology = (
            stages.get("topology")
            if isinstance(stages, dict)
            else next((s for s in stages if s.get("name") == "topology"), None)
        )
        assert topology and topology.get("status") == "complete", manifest
        head = subprocess.run(
            ["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True
        ).stdout.strip()
        assert manifest["git"]["commit"] == head  # no .git on the host: the commit comes with the job
        assert json.loads((local_run / "remote.json").read_text())["job"]["code_shipped_by"] == "archive"
        (setup,) = (remote_dir / "jobs").glob("*/setup.sh")  # hostruntime.setup_script: venv, code, python, …
        venv, _code, python = shlex.split(
            next(line for line in setup.read_text().splitlines() if line.startswith("set -- "))
        )[2:5]
        # the installer is handed the conda Python
        assert python == f"{conda_bin}/python3.11", setup.read_text()
        assert Path(venv).parent == remote_dir / "venvs" and venv.endswith("-py3.11")
        assert (Path(venv) / ".cardtime-ready").exists()
        (job_log,) = (remote_dir / "jobs").glob("*/log")
        if "creating the venv" in job_log.read_text():  # installed here (else reused, as a host reuses it)
            assert os.path.realpath(Path(venv) / "bin" / "python") == str(PY311.resolve())
        else:
            assert f"venv {venv} reused" in job_log.read_text()
    finally:
        sshd.stop()  # the PID namespace ends with it: the job, if any is left, too
