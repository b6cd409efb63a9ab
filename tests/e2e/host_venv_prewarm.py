"""The remote tests' host venv, installed before `make test` (.ci/run calls `python -m
tests.e2e.host_venv_prewarm`).

Every remote and multi-node e2e test links its host's venvs to one cache (remote_loopback.host_venv_cache), as
a real host keeps its venvs across runs. The first of them to reach an empty cache installs the CPU venv for
real: pip, the wheels, the bytecode — 31–39 s alone on 2 cores, more beside the other serial line, inside the
test suite's 12 minutes. This is that same install made the same way, beforehand, as .ci/run builds the images
beforehand: the loopback host's own probe (preflight.PROBE_SCRIPT under sshd's default PATH) picks the Python,
hostruntime.venv_dir names the venv and hostruntime.setup_script installs it, so a test finds it ready and
says "reused". A failed prewarm costs nothing but the time: the first test installs it again, and fails there
if the install is broken.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.e2e.remote_loopback import clean_env, host_venv_cache, make_repo

# What sshd gives a non-interactive session (its compiled-in default PATH): the Python the loopback host would
# use.
SSHD_DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def prewarm(say=print) -> Path:
    """Install (or find ready) the CPU venv the loopback hosts will ask for; returns its path."""
    from provisioning.runtime import hostruntime
    from provisioning.session import preflight

    cache = host_venv_cache()
    with tempfile.TemporaryDirectory(prefix="cardtime-venv-prewarm-") as tmp:
        base = Path(tmp) / "host"
        base.mkdir()
        (base / "venvs").symlink_to(cache)
        env = clean_env(PATH=SSHD_DEFAULT_PATH)
        probe = subprocess.run(
            ["sh", "-c", preflight.probe_command(str(base))],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        facts = preflight.parse_probe(probe.stdout)
        if not facts.python or not facts.python_exe:
            raise RuntimeError(f"the loopback host's probe found no Python: {probe.stderr.strip()[-400:]}")
        # The code as a test ships it (this working tree's files, one commit): the venv's key is its
        # pyproject.toml.
        code = make_repo(Path(tmp) / "code")
        venv = hostruntime.venv_dir(str(base), hostruntime.pyproject_key(code, "HEAD"), facts.python)
        say(f"the host venv {Path(venv).name} with {facts.python_exe} (cache: {cache})")
        script = hostruntime.setup_script(venv, str(code), python=facts.python_exe)
        done = subprocess.run(["sh", "-c", script], env=env, capture_output=True, text=True, timeout=1800)
        for line in (done.stdout + done.stderr).splitlines():
            say(line)
        if done.returncode != 0:
            raise RuntimeError(f"the host venv's install exited {done.returncode}")
        return cache / Path(venv).name


def main(argv: list[str]) -> int:
    if argv:
        print("usage: python -m tests.e2e.host_venv_prewarm", file=sys.stderr)
        return 2
    started = time.monotonic()
    try:
        venv = prewarm()
    except (RuntimeError, subprocess.SubprocessError, OSError) as e:
        print(f"the host venv was not prewarmed (the first remote test installs it): {e}", file=sys.stderr)
        return 1
    print(f"host venv ready: {venv} in {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
