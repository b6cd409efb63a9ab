"""The README's quickstart, typed as written by someone who has never seen cardtime, on this machine.

`make rehearse` is the session's rehearsal itself (tests/conftest.py runs the quickstart's first line for
every test that reads a run). `make plan TIER=quick RATE=24` and `make remote HOST=… TIER=quick` run word for
word in a fresh clone, the README's example box replaced by a loopback "box": a real sshd on 127.0.0.1 whose
sessions have a home of their own and a PATH of basic tools, git, Python 3.11 and a stand-in `nvidia-smi`
listing one H100 on an R550 driver — no Docker, so preflight picks the host's Python. The laptop's user keeps
their key and the box's host key in ~/.ssh, as after a first `ssh root@box`; nothing else is given.

The one thing this machine cannot do is the box's first install (torch of the CUDA line the driver runs, a
multi-GB download): the box has the venv such a first run leaves. Everything else is the real path, up to the
point where a box without a GPU must stop: the job's check that torch there sees the GPU, which refuses this
CPU torch in one line that the laptop prints, exit 2, no stage run. Run again, the command starts a new job
(the fix may be CUDA_LINE= or IMAGE=) rather than re-attaching to the refused one.
"""

from __future__ import annotations

import os
import pwd
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from remote_loopback import (  # noqa: E402
    clean_env,
    fake_nvidia_smi,
    make_repo,
    sandbox_bin,
    sshd_available,
    start_sshd,
)

from provisioning import cuda_check_host  # noqa: E402
from provisioning.runtime import hostruntime  # noqa: E402
from suite.hardware.cuda_lines import line_named  # noqa: E402
from tests.readme_quickstart import EXAMPLE_HOST, quickstart_commands, without_make  # noqa: E402

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.needs("sshd"),
    pytest.mark.timeout(900),
    pytest.mark.skipif(not sshd_available(), reason="needs openssh-server (.ci/run installs it)"),
]
ROOT = Path(__file__).resolve().parents[2]
VENV = ROOT / ".venv"
BOX_PYTHON = Path("/usr/bin/python3.11")
LOGIN_SSH = Path(pwd.getpwuid(os.getuid()).pw_dir, ".ssh")
# the settings make remote reads: a new user's shell has none of them
MAKE_REMOTE_VARIABLES = (
    "PROFILE",
    "HOST",
    "TIER",
    "RATE",
    "RUNTIME",
    "REMOTE_DIR",
    "KEY",
    "KNOWN_HOSTS",
    "SSH_CONFIG",
)
BIND_HOME = 'mount --bind "$1" "$2" && shift 2 && exec "$@"'


def new_users_clone(folder: Path) -> Path:
    """A fresh clone of this checkout whose .venv is this checkout's, already set up: `make` finds it
    installed (its stamp newer than the clone's pyproject.toml) and installs nothing."""
    repo = make_repo(folder)
    (repo / ".venv").symlink_to(VENV)
    stamp = (VENV / ".installed").stat().st_mtime
    os.utime(repo / "pyproject.toml", (stamp - 60, stamp - 60))
    return repo


def laptop_home(folder: Path, sshd) -> Path:
    """The user's home: their key as ~/.ssh/id_ed25519 and the box's host key in ~/.ssh/known_hosts."""
    ssh = folder / ".ssh"
    ssh.mkdir(parents=True, mode=0o700)
    shutil.copy(sshd.client_key, ssh / "id_ed25519")
    (ssh / "id_ed25519").chmod(0o600)
    (ssh / "known_hosts").write_text(sshd.known_hosts_line())
    return folder


def type_command(command: str, repo: Path, home: Path) -> subprocess.CompletedProcess:
    """`command` typed in `repo` by a user whose ~/.ssh is `home`'s: mounted over this login's ~/.ssh in a
    mount namespace of the command's own (ssh takes ~ from the password database, not from $HOME), so the
    real one is neither read nor written."""
    env = without_make(clean_env(HOME=str(LOGIN_SSH.parent)))
    for name in MAKE_REMOTE_VARIABLES:
        env.pop(name, None)  # nothing but what the README's line says
    in_home = [
        "unshare",
        "--mount",
        "--propagation",
        "private",
        "sh",
        "-c",
        BIND_HOME,
        "sh",
        str(home / ".ssh"),
    ]
    return subprocess.run(
        [*in_home, str(LOGIN_SSH), *shlex.split(command)],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_the_rehearsal_line_prints_where_its_report_is(rehearsal_run):
    printed = (rehearsal_run / "rehearsal-output.txt").read_text()
    assert printed.splitlines()[0] == "exit 0", printed[-3000:]
    assert f"report: {rehearsal_run / 'report.html'}" in printed.splitlines(), printed[-3000:]


@pytest.mark.skipif(not BOX_PYTHON.exists(), reason="needs /usr/bin/python3.11 as the box's Python")
@pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("unshare"),
    reason="needs root and unshare to give the user a ~/.ssh",
)
def test_the_quickstart_prices_a_rental_and_starts_a_remote_run(tmp_path):
    _, plan, remote = quickstart_commands()
    assert EXAMPLE_HOST in remote and "TIER=quick" in remote and "RATE=24" in plan

    box_home = tmp_path / "box-home"
    box_home.mkdir()
    box_bin = fake_nvidia_smi(sandbox_bin(tmp_path / "box-bin", extra=("git", "python3", "python3.11")))
    sshd = start_sshd(tmp_path / "sshd", path_only=box_bin, home=box_home)
    repo = new_users_clone(tmp_path / "laptop")
    home = laptop_home(tmp_path / "laptop-home", sshd)
    # The venv a first run on this box leaves (its install is the one step this machine cannot take).
    commit = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    venv = Path(
        hostruntime.venv_dir(
            str(box_home / "cardtime"), hostruntime.pyproject_key(repo, commit), (3, 11), line_named("cu126")
        )
    )
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").write_text(
        f'#!/bin/sh\nexec {shlex.quote(str(VENV / "bin" / "python"))} "$@"\n'
    )
    (venv / "bin" / "python").chmod(0o755)
    (venv / ".cardtime-ready").touch()
    made_ssh_folder = not LOGIN_SSH.exists()  # a mount point for the user's own; removed after
    try:
        LOGIN_SSH.mkdir(mode=0o700, exist_ok=True)
        priced = type_command(plan, repo, home)
        started = [type_command(remote.replace(EXAMPLE_HOST, sshd.host), repo, home) for _ in range(2)]
    finally:
        sshd.stop()
        if made_ssh_folder:
            LOGIN_SSH.rmdir()

    said = priced.stdout + priced.stderr
    assert priced.returncode == 0, said
    billed = re.search(r"^billed +(\d+\.\d) +", said, re.M)
    cost = re.search(r"^cost at \$24/hour: \$(\d+\.\d\d)$", said, re.M)
    assert billed and cost, said  # the billed minutes, and what they cost at RATE=24
    assert float(cost.group(1)) == pytest.approx(float(billed.group(1)) / 60 * 24, abs=0.03), said

    job_dirs = sorted(p.parent for p in (box_home / "cardtime").glob("jobs/*/job.json"))
    assert len(job_dirs) == 2, [r.stdout + r.stderr for r in started]  # the second did not re-attach
    for job_dir, run in zip(job_dirs, started):
        out = run.stdout + run.stderr
        assert run.returncode == 2, out
        assert out.startswith("[1/7 preflight"), out  # the first line a user reads is cardtime's, not make's
        assert f"job {job_dir.name} started" in out and "CUDA line cu126" in out, out  # the R550 driver's
        refused = (job_dir / "refused").read_text().strip()
        assert "is a CPU build" in refused and f"the host venv ({venv}" in refused, refused
        assert f"error: {sshd.host}: {refused}" in out, out  # the job's one line, on the laptop
        assert (job_dir / "exit").read_text().strip() == "2" and not (job_dir / "LAST").exists()
        log = (job_dir / "log").read_text()
        assert (
            log.index("── set-up (")
            < log.index("── GPU check")
            < log.index(cuda_check_host.REFUSED + refused)
        )
        assert "── set-up done" not in log and "topology" not in log.split("── GPU check")[1]  # no stage ran
