"""RUNTIME=host: the host's own Python in a venv, for rented boxes that are themselves containers.

The venv lives at <base>/venvs/<sha256(pyproject.toml)[:16]>-py<X.Y>[-<CUDA line>] and is marked ready only
after `pip install -e` succeeded, so a re-attach or a second run at another commit reuses it
(same pyproject.toml, same dependencies) and an install cut off half-way is redone from scratch,
never trusted. The install runs inside the detached job (setup_script → jobs.start), so a
sleeping laptop or a dropped link does not cut it off. The suite's own code always comes from the
run's checkout: the job runs in it with PYTHONPATH pointing at it (see drive.py), whichever
checkout the editable install named.
"""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

from provisioning.session.preflight import HostFacts
from provisioning.session.shell import join
from suite.hardware.cuda_lines import TORCH_VERSION, CudaLine

# $1 venv, $2 code dir, $3 python to make the venv with, $4 torch's wheel index ('' = pip's default),
# $5 torch requirement. pip's own output is kept for the error message; the ready mark comes last.
# No pip cache (a CUDA torch is GBs on a small container disk) and TMPDIR beside the venv, on the
# remote directory's disk rather than the container disk's /tmp.
ENSURE_VENV = r"""
set -e
venv=$1 code=$2 python=$3 index=$4 torch=$5
# One install of a venv at a time: a set-up that finds another installing it (the nodes after the first, all at
# once, where two of them share a disk the first does not) waits for it, then reuses it. A ready venv takes no lock.
if [ ! -f "$venv/.cardtime-ready" ]; then
  mkdir -p -- "${venv%/*}"
  exec 9>"$venv.lock"
  if command -v flock >/dev/null 2>&1; then flock 9; fi
fi
if [ -f "$venv/.cardtime-ready" ]; then
  echo "venv $venv reused"
else
  echo "creating the venv $venv (pip install -e; first time on this host: minutes)"
  rm -rf -- "$venv"
  mkdir -p -- "$venv.tmp"
  export TMPDIR="$venv.tmp" PIP_NO_CACHE_DIR=1
  "$python" -m venv "$venv"
  if [ -n "$index" ]; then
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-compile --index-url "$index" "$torch"
  fi
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-compile -e "$code"
  # The bytecode on every core at once: pip compiles on one (half of a CPU venv's install on 2 cores, more on a
  # box of 100). Compiled all the same, as pip would: a box whose PYTHONDONTWRITEBYTECODE is set would otherwise
  # compile torch in every worker at every start. A file that does not compile (pip ignores those too) is left.
  "$venv/bin/python" -m compileall -q -j 0 "$venv/lib" >/dev/null || true
  rm -rf -- "$venv.tmp"
  printf '%s\n' "$code" > "$venv/.cardtime-code"
  : > "$venv/.cardtime-ready"
fi
exec 9>&-
cd -- "$code"
"$venv/bin/python" -c 'import suite, torch; print("torch", torch.__version__)'
"""  # noqa: E501


def pyproject_key(root: Path, commit: str) -> str:
    """sha256 of pyproject.toml at `commit`, 16 hex digits: the venv's identity."""
    data = subprocess.run(
        ["git", "-C", str(root), "show", f"{commit}:pyproject.toml"], capture_output=True, check=True
    ).stdout
    return hashlib.sha256(data).hexdigest()[:16]


def venv_dir(base: str, key: str, python: tuple[int, ...], line: CudaLine | None = None) -> str:
    """One venv per dependencies, Python and CUDA line (a CPU profile's venv keeps pip's own torch)."""
    return f"{base}/venvs/{key}-py{python[0]}.{python[1]}{'-' + line.name if line else ''}"


def setup_script(venv: str, code_dir: str, *, python: str = "python3", line: CudaLine | None = None) -> str:
    """ENSURE_VENV with its arguments — the venv made with `python`, torch from `line`'s wheel index —
    as the detached job's set-up (jobs.start), so that an install outlives a sleeping laptop or a
    dropped link; leaves `<venv>/bin/python`."""
    index = line.torch_index if line else ""
    return "set -- " + join([venv, code_dir, python, index, f"torch=={TORCH_VERSION}"]) + "\n" + ENSURE_VENV


def host_job_environment(facts: HostFacts) -> dict[str, str]:
    """RUNTIME=host: what the job needs from the box's own image environment (a pod's pid 1), which a
    non-interactive SSH session does not get: its NCCL_* and CARDTIME_* settings, and a PATH that is the
    session's, then the container's, then the folders of the nccl-tests and nsys preflight found."""
    env = {k: v for k, v in facts.container_env.items() if k.startswith(("NCCL_", "CARDTIME_"))}
    if facts.nccl_tests and "CARDTIME_NCCL_TESTS_DIR" not in env:
        env["CARDTIME_NCCL_TESTS_DIR"] = facts.nccl_tests
    tool_dirs = [d for d in (facts.nccl_tests, facts.nsys.rsplit("/", 1)[0] if facts.nsys else None) if d]
    folders: list[str] = []
    for part in ":".join([facts.session_path, facts.container_env.get("PATH", ""), *tool_dirs]).split(":"):
        if part and part not in folders:
            folders.append(part)
    session = [p for p in facts.session_path.split(":") if p]
    if folders != session:  # only where it adds something: the job script sets values literally
        env["PATH"] = ":".join(folders)
    return env
