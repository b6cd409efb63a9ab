"""The host's kernel log when the stage runs where it cannot read it, and a sandbox's log told from a host's.

Inside the suite's container (RUNTIME=docker) `dmesg` reads nothing of the host's, or is refused, so the
XID check could never be decided there. The job's set-up reads the log on the host instead, the same three
ways the stage would (provisioning/runtime/host_kernel_log.py), into the job's folder, which the container
mounts at the same path, and names the file in HANDED_ENV. The stage judges that file and says which window
it covers: from boot up to the container's start; XIDs after that are not seen by this run.

A gVisor sandbox answers `dmesg` with its own invented lines ("Starting gVisor...", "Digging up root..."),
never the host's: a log that says so is no host log, and is never judged clean.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Any, Callable

from suite.parsers import ParseError

HANDED_ENV = "CARDTIME_HOST_KERNEL_LOG"
SOURCE_SUFFIX = ".source"
"""Beside the handed log: `<how> <UTC time>`, how = dmesg | sudo-dmesg | journalctl-k | gvisor | none."""
GVISOR = re.compile(r"gvisor", re.IGNORECASE)
SANDBOX_WHY = (
    "the box is a gVisor sandbox: its dmesg is the sandbox's own, never the host's XIDs; ask the provider "
    "for the host's kernel log (or capture it there and `cardtime ingest` it)"
)


def is_sandbox_log(text: str) -> bool:
    """gVisor's dmesg names itself in its first lines."""
    return bool(GVISOR.search("\n".join(text.splitlines()[:5])))


def handed_log() -> Path | None:
    """The file the job's set-up handed the stage, when it did."""
    value = os.environ.get(HANDED_ENV, "")
    return Path(value) if value else None


def read_handed(path: Path, raw: Path, parse: Callable[[str], dict]) -> tuple[dict[str, Any] | None, str]:
    """The handed log parsed, with the window it covers; None and why, when the host's login could not read
    it or it is a sandbox's."""
    source = path.with_name(path.name + SOURCE_SUFFIX)
    how, _, when = (source.read_text().strip() if source.is_file() else "").partition(" ")
    if how == "gvisor":
        return None, SANDBOX_WHY
    text = path.read_text(encoding="utf-8", errors="replace") if path.is_file() else ""
    if how in ("", "none") or not text.strip():
        return None, (
            "the host's kernel log was not readable by this login when the job started (dmesg, sudo -n dmesg "
            "and journalctl -k refused): allow `sudo -n dmesg` or add the user to the adm group; or capture "
            "`sudo dmesg -T` on the host and `cardtime ingest` it beside the run"
        )
    raw.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(path, raw / "kernel-log-host.txt")
    try:
        parsed = parse(text)
    except ParseError as e:
        return None, f"the host's kernel log ({how}) handed by the job is unreadable: {e}"
    parsed["window"] = f"the host's log ({how}) from boot to {when}, when the container started"
    return parsed, ""
