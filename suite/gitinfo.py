"""Which commit a tree is at, asked of git once for the run manifest and the image build
(provisioning/runtime/images.py).

head_commit(Path("."))    # '483413f…' (40 hex digits), or None outside a git checkout
suite_checkout()          # {"commit": …, "dirty": …} of this suite, for manifest.json
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

SUITE_TREE = Path(__file__).resolve().parent.parent
IMAGE_COMMIT_ENV = "CARDTIME_COMMIT"
"""Set by the image build (a build argument): inside the image there is no .git to ask."""


def _git(repo: Path, *args: str) -> str | None:
    """git's stdout, stripped; None when git is missing, fails, or `repo` is no checkout."""
    try:
        out = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, timeout=10, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip()


def head_commit(repo: Path) -> str | None:
    """HEAD's commit in `repo`, or None where there is no git checkout (or no git)."""
    return _git(repo, "rev-parse", "HEAD") or None


def suite_checkout() -> dict[str, Any]:
    """The suite's commit and whether tracked files differ from it; CARDTIME_COMMIT (dirty unknown) in the
    image."""
    commit = head_commit(SUITE_TREE)
    if commit is None:
        return {"commit": os.environ.get(IMAGE_COMMIT_ENV, "unknown"), "dirty": None}
    status = _git(SUITE_TREE, "status", "--porcelain", "--untracked-files=no")
    return {"commit": commit, "dirty": None if status is None else bool(status)}
