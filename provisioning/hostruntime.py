"""RUNTIME=host: the host's own Python in a venv, for rented boxes that are themselves containers.

The venv lives at <base>/venvs/<sha256(pyproject.toml)[:16]>-py<X.Y>[-<CUDA line>] and is marked ready only
after `pip install -e` succeeded, so a re-attach or a second run at another commit reuses it
(same pyproject.toml, same dependencies) and an install cut off half-way is redone from scratch,
never trusted. The suite's own code always comes from the run's checkout: the job runs in it
with PYTHONPATH pointing at it (see remote.py), whichever checkout the editable install named.
"""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

from suite.cuda_lines import TORCH_VERSION, CudaLine

from .connection import Remote
from .shell import join

READY = ".cardtime-ready"

# $1 venv, $2 code dir, $3 python to make the venv with, $4 torch's wheel index ('' = pip's default),
# $5 torch requirement. pip's own output is kept for the error message; the ready mark comes last.
# No pip cache (a CUDA torch is GBs on a small container disk) and TMPDIR beside the venv, on the
# remote directory's disk rather than the container disk's /tmp.
ENSURE_VENV = r"""
set -e
venv=$1 code=$2 python=$3 index=$4 torch=$5
if [ ! -f "$venv/.cardtime-ready" ]; then
  echo "@@installing"
  rm -rf -- "$venv"
  mkdir -p -- "$venv.tmp"
  export TMPDIR="$venv.tmp" PIP_NO_CACHE_DIR=1
  "$python" -m venv "$venv"
  if [ -n "$index" ]; then
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --index-url "$index" "$torch"
  fi
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -e "$code"
  rm -rf -- "$venv.tmp"
  printf '%s\n' "$code" > "$venv/.cardtime-code"
  : > "$venv/.cardtime-ready"
fi
cd -- "$code"
"$venv/bin/python" -c 'import suite, torch; print("torch", torch.__version__)'
"""


def pyproject_key(root: Path, commit: str) -> str:
    """sha256 of pyproject.toml at `commit`, 16 hex digits: the venv's identity."""
    data = subprocess.run(["git", "-C", str(root), "show", f"{commit}:pyproject.toml"], capture_output=True, check=True).stdout
    return hashlib.sha256(data).hexdigest()[:16]


def venv_dir(base: str, key: str, python: tuple[int, ...], line: CudaLine | None = None) -> str:
    """One venv per dependencies, Python and CUDA line (a CPU profile's venv keeps pip's own torch)."""
    return f"{base}/venvs/{key}-py{python[0]}.{python[1]}{'-' + line.name if line else ''}"


def ensure_venv(remote: Remote, venv: str, code_dir: str, say=print, *, python: str = "python3",
                line: CudaLine | None = None) -> str:
    """Create or reuse the venv with `python`, torch from `line`'s wheel index; returns the venv's python."""
    r = remote.run(["test", "-f", f"{venv}/{READY}"], check=False)
    if r.exit_code != 0:
        say(f"creating the venv {venv} (pip install -e; first time on this host: minutes)")
    index = line.torch_index if line else ""
    out = remote.run("set -- " + join([venv, code_dir, python, index, f"torch=={TORCH_VERSION}"]) + "\n" + ENSURE_VENV,
                     timeout=3600,
                     what="installing the suite into the host's venv failed",
                     hint="read pip's error above; RUNTIME=docker avoids the host's Python altogether")
    if "@@installing" not in out.stdout:
        say(f"venv {venv} reused")
    return f"{venv}/bin/python"

