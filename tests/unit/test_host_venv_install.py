"""hostruntime.ENSURE_VENV, the host's venv install, run for real by /bin/sh with a stand-in Python that logs
what it is asked to do: two set-ups reaching one venv at once install it once, the second waiting and then
reusing it."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from provisioning.runtime import hostruntime

# The stand-in for the host's python3 (and, copied into the venv, the venv's): `-m venv DIR` makes
# DIR/bin/python, `-m pip install` takes a while (the window two installs would overlap in), each step logged
# with the set-up's tag.
FAKE_PYTHON = r"""#!/bin/sh
log={log}
case "$1 $2" in
  "-m venv") mkdir -p "$3/bin" "$3/lib"; cp "$0" "$3/bin/python"; echo "$TAG venv" >> "$log" ;;
  "-m pip") echo "$TAG pip begins" >> "$log"; sleep 1; echo "$TAG pip ends" >> "$log" ;;
  "-m compileall") ;;
  *) echo "torch 0.0-stand-in" ;;
esac
"""


@pytest.fixture
def host(tmp_path: Path) -> dict[str, Path]:
    if shutil.which("flock") is None:
        pytest.skip("flock (util-linux) is not installed")
    log = tmp_path / "steps.log"
    python = tmp_path / "python3"
    python.write_text(FAKE_PYTHON.replace("{log}", str(log)))
    python.chmod(0o755)
    code = tmp_path / "code"
    code.mkdir()
    return {"python": python, "log": log, "code": code, "venv": tmp_path / "base" / "venvs" / "key-py3.11"}


def start_setup(host: dict[str, Path], tag: str) -> subprocess.Popen:
    script = hostruntime.setup_script(str(host["venv"]), str(host["code"]), python=str(host["python"]))
    return subprocess.Popen(
        ["sh", "-c", script],
        env={"PATH": "/usr/bin:/bin", "TAG": tag},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def test_two_setups_at_once_install_the_venv_once(host):
    first, second = start_setup(host, "a"), start_setup(host, "b")
    said = [p.communicate(timeout=60)[0] for p in (first, second)]
    assert [p.returncode for p in (first, second)] == [0, 0], said
    steps = host["log"].read_text().split("\n")
    installer = steps[0].split()[0]
    assert steps == [f"{installer} venv", f"{installer} pip begins", f"{installer} pip ends", ""], steps
    waited = said[1] if installer == "a" else said[0]
    assert f"venv {host['venv']} reused" in waited and "torch 0.0-stand-in" in waited, said
    assert (host["venv"] / ".cardtime-ready").exists()


def test_a_setup_reusing_a_ready_venv_does_not_wait_for_the_lock_holder(host):
    """The lock is the install's alone: a set-up that finds the venv ready goes on while another set-up holds
    the lock file (as a job would, had the lock outlived its install)."""
    done = start_setup(host, "a")
    assert done.communicate(timeout=60)[0] and done.returncode == 0
    holder = subprocess.Popen(["flock", str(host["venv"]) + ".lock", "sleep", "30"])
    try:
        again = start_setup(host, "b")
        out = again.communicate(timeout=10)[0]  # waiting for the holder would take its 30 s
        assert again.returncode == 0 and f"venv {host['venv']} reused" in out, out
    finally:
        holder.kill()
        holder.wait()
