"""A run's id and its folder: 20261129T1630Z-box-gloo-cpu (UTC time, host, profile), -2, -3 … when taken.

The runner names every run with these, `suite ingest` its ingested runs; suite.config is the one module they
read.
"""

from __future__ import annotations

import socket
from datetime import datetime, timezone
from pathlib import Path

from suite.config import Profile


def utc_now() -> datetime:
    return datetime.now(timezone.utc)


def short_host() -> str:
    host = socket.gethostname().split(".")[0] or "host"
    return "".join(ch if ch.isalnum() or ch == "-" else "-" for ch in host)


def new_run_id(profile: Profile, when: datetime | None = None) -> str:
    """20261129T1630Z-box-gloo-cpu: UTC time, host, profile."""
    when = when or utc_now()
    return f"{when:%Y%m%dT%H%MZ}-{short_host()}-{profile.name}"


def unique_run_path(base: Path, run_id: str) -> Path:
    """The first free folder of run_id, -2, -3 …, made here: mkdir is atomic, so two runs started in the same
    minute (two `make rehearse` at once) each get a folder of their own, never the same one."""
    base.mkdir(parents=True, exist_ok=True)
    path, n = base / run_id, 2
    while True:
        try:
            path.mkdir()
            return path
        except FileExistsError:
            path, n = base / f"{run_id}-{n}", n + 1
