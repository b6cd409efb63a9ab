"""The runtime's set-up runs inside the detached job, over a real sshd on 127.0.0.1.

The laptop side of `make remote` is SIGKILLed in the middle of the venv install; the install
goes on on the host; the next `make remote` re-attaches to the same job, which finishes the
install, runs the stage and is fetched: nothing is installed (downloaded) twice.

The installer is the one thing replaced: a stand-in for ENSURE_VENV (same arguments, same ready mark) that
counts its downloads, "downloads" until the test releases it (a file the test creates once the laptop is dead
and the next `make remote` has re-attached: no fixed sleep to outlast) and makes a `python` running this
checkout's venv, so the test needs no network and no second torch. Everything else is the real path: shipping,
the job, its set-up step, re-attach, follow, fetch, the report.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from remote_loopback import clean_env, make_repo, sshd_available, start_sshd  # noqa: E402

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.needs("sshd"),
    pytest.mark.timeout(900),
    pytest.mark.skipif(not sshd_available(), reason="needs openssh-server (.ci/run installs it)"),
]
ROOT = Path(__file__).resolve().parents[2]
LAPTOP_PY = ROOT / ".venv" / "bin" / "python"

# $1 venv, $2 code dir, as hostruntime.ENSURE_VENV. {downloads} counts installs that downloaded; the
# download lasts until {release} exists (at most 5 minutes).
FAKE_INSTALL = r"""
set -e
venv=$1 code=$2
if [ -f "$venv/.cardtime-ready" ]; then
  echo "venv $venv reused"
else
  echo "fake install: downloading (until released)"
  echo download >> {downloads}
  n=0
  while [ ! -e {release} ] && [ $n -lt 3000 ]; do sleep 0.1; n=$((n + 1)); done
  mkdir -p "$venv/bin"
  printf '#!/bin/sh\nexec %s "$@"\n' {python} > "$venv/bin/python"
  chmod +x "$venv/bin/python"
  : > "$venv/.cardtime-ready"
fi
"""

DRIVER = """
import sys
from provisioning.runtime import hostruntime
hostruntime.ENSURE_VENV = open(sys.argv[1]).read()
from provisioning.__main__ import main
sys.exit(main(sys.argv[2:]))
"""


def remote_args(tmp_path: Path, sshd, profile: str) -> tuple[list[str], Path]:
    """`python -m provisioning remote` RUNTIME=host STAGES=topology against `sshd`, with the stand-in
    installer (its downloads counted in tmp_path/downloads, each done once tmp_path/release exists);
    returns the command and the remote folder."""
    from provisioning.session.shell import quote

    remote_dir = tmp_path / "host" / "cardtime"
    installer = tmp_path / "install.sh"
    installer.write_text(
        FAKE_INSTALL.replace("{downloads}", quote(tmp_path / "downloads"))
        .replace("{release}", quote(tmp_path / "release"))
        .replace("{python}", quote(LAPTOP_PY))
    )
    kh = tmp_path / "known_hosts"
    kh.write_text(sshd.known_hosts_line())
    return (
        [
            str(LAPTOP_PY),
            "-c",
            DRIVER,
            str(installer),
            "remote",
            "--host",
            sshd.host,
            "--key",
            str(sshd.client_key),
            "--known-hosts",
            str(kh),
            "--remote-dir",
            str(remote_dir),
            "--profile",
            profile,
            "--runtime",
            "host",
            "--stages",
            "topology",
            "--detach",
            "setsid",
            "--runs-dir",
            str(tmp_path / "runs"),
        ],
        remote_dir,
    )


def test_a_laptop_killed_mid_install_loses_nothing_and_installs_once(tmp_path):
    sshd = start_sshd(tmp_path / "sshd")
    downloads = tmp_path / "downloads"
    try:
        repo = make_repo(tmp_path / "laptop")
        args, remote_dir = remote_args(tmp_path, sshd, "gloo-cpu")
        env = clean_env(PYTHONPATH=str(repo))
        log1 = tmp_path / "first.log"
        with open(log1, "w") as out:
            first = subprocess.Popen(
                args, cwd=repo, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        job_log = None
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and first.poll() is None:
            logs = list(remote_dir.glob("jobs/*/log"))
            if logs and "fake install: downloading" in logs[0].read_text():
                job_log = logs[0]
                break
            time.sleep(0.1)
        assert job_log is not None and first.poll() is None, log1.read_text()
        os.killpg(first.pid, signal.SIGKILL)  # the laptop sleeps mid-install
        first.wait()
        job_dir = job_log.parent
        os.kill(int((job_dir / "pid").read_text()), 0)  # the install (in the job) goes on
        assert not (job_dir / "exit").exists()

        log2 = tmp_path / "second.log"
        with open(log2, "w") as out2:
            second = subprocess.Popen(args, cwd=repo, env=env, stdout=out2, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 300
        while (
            time.monotonic() < deadline and second.poll() is None and "re-attaching" not in log2.read_text()
        ):
            time.sleep(0.1)
        assert not (job_dir / "exit").exists()  # re-attached to the job still installing
        (tmp_path / "release").touch()  # the download ends
        try:
            second.wait(timeout=600)
        finally:
            if second.poll() is None:
                second.kill()
        out = log2.read_text()
        assert "re-attaching" in out and job_dir.name in out, out
        assert len(list(remote_dir.glob("jobs/*/job.json"))) == 1, "a second job was started"
        run_dir = Path((job_dir / "LAST").read_text().strip())
        verdicts = json.loads((run_dir / "verdicts.json").read_text())["verdicts"]
        assert verdicts, out
        assert second.returncode == (1 if any(v["status"] == "fail" for v in verdicts) else 0), out
        assert downloads.read_text().splitlines() == ["download"], "the install ran twice"
        log = job_log.read_text()
        assert log.count("fake install: downloading") == 1 and log.count("── set-up done") == 1
        # set-up, then the run
        assert log.index("fake install") < log.index("── set-up done") < log.index("topology")
        assert "GPU check" not in log and not (job_dir / "refused").exists()  # a CPU profile checks no GPU
        assert (tmp_path / "runs" / run_dir.name / "report.html").is_file(), out
    finally:
        for pid_file in remote_dir.glob("jobs/*/pid"):
            try:
                os.killpg(int(pid_file.read_text()), signal.SIGTERM)
            except (OSError, ValueError):
                pass
        sshd.stop()


FAKE_DOCKER = r"""#!/bin/sh
# Records each call; `image inspect NAME` succeeds once NAME was "built"; build keeps its stdin.
printf '%s\n' "$*" >> "$FAKE_DOCKER_DIR/calls"
case "$1 $2" in
  "image inspect") [ "$(cat "$FAKE_DOCKER_DIR/built" 2>/dev/null)" = "$3" ] ;;
  "build --tag") cat > "$FAKE_DOCKER_DIR/context.tar"; printf '%s' "$3" > "$FAKE_DOCKER_DIR/built" ;;
  pull*) exit 1 ;;
esac
"""


def test_the_image_set_up_builds_from_the_shipped_context_once(tmp_path):
    """RUNTIME=docker's set-up script, run on the host as the job runs it, against a stand-in
    `docker` that records its calls: built once from exactly HEAD's files, then reused; an
    IMAGE= value reaches `docker pull` as one literal word."""
    import tarfile

    from remote_loopback import git_repo

    from provisioning.job import codesync
    from provisioning.runtime import remote_docker
    from provisioning.session.connection import Remote
    from provisioning.session.hosts import parse_host
    from suite.hardware.cuda_lines import line_named

    sshd = start_sshd(tmp_path / "sshd")
    fake = tmp_path / "fakebin"
    fake.mkdir()
    (fake / "docker").write_text(FAKE_DOCKER)
    (fake / "docker").chmod(0o755)
    kh = tmp_path / "known_hosts"
    kh.write_text(sshd.known_hosts_line())
    remote = Remote.open(parse_host(sshd.host), key=str(sshd.client_key), known_hosts=kh)
    try:
        local = codesync.local_checkout(git_repo(tmp_path / "laptop"), allow_dirty=False)
        base = str(tmp_path / "host")
        env = f"export PATH={fake}:$PATH FAKE_DOCKER_DIR={fake}\n"
        for _ in range(2):
            tag, setup = remote_docker.image_setup(remote, local, None, base, say=lambda s: None)
            remote.run(env + setup)
        cu126 = line_named("cu126")  # the older line, as preflight chooses it for an R550 driver
        tag126, setup = remote_docker.image_setup(remote, local, None, base, say=lambda s: None, line=cu126)
        remote.run(env + setup)
        hostile = "x;$(touch pwned)"
        image, pull = remote_docker.image_setup(remote, local, hostile, base, say=lambda s: None)
        assert image == hostile and remote.run(env + pull, check=False).exit_code != 0
    finally:
        remote.close()
        sshd.stop()
    calls = (fake / "calls").read_text().splitlines()
    assert tag == f"cardtime:{local.commit[:12]}"
    builds = [c for c in calls if c.startswith("build")]
    line_args = " ".join(f"--build-arg {k}={v}" for k, v in cu126.build_args().items())
    assert tag126 == f"cardtime:{local.commit[:12]}-cu126"
    assert builds == [
        f"build --tag {tag} --build-arg CARDTIME_COMMIT={local.commit} -",
        f"build --tag {tag126} --build-arg CARDTIME_COMMIT={local.commit} {line_args} -",
    ], calls
    assert f"pull {hostile}" in calls
    with tarfile.open(fake / "context.tar") as tar:
        assert sorted(tar.getnames()) == ["README", "pyproject.toml"]
    assert not list(tmp_path.rglob("pwned")) and not (Path.home() / "pwned").exists()
