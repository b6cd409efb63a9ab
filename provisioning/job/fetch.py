"""Fetch a finished run directory back to the laptop: resumable, every file's size and sha256 checked.

    fetch_run(remote, "/root/cardtime/runs/20261129T1630Z-box-nccl-gpu", Path("runs"))

The host lists its files with sizes and sha256 (one round trip). A file already here with the
same size and digest is skipped; a partial `<name>.part` left by a dropped connection is resumed
from its length; each download is checked against the host's digest before it is renamed into
place, and downloaded once more if it does not match.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
from dataclasses import dataclass, field
from pathlib import Path

from provisioning.session.connection import Remote, RemoteError
from provisioning.session.shell import HOST_PYTHON

CHUNK = 1 << 20  # 1 MiB per SFTP read
EVIDENCE_PREFIX = "bundle-"  # suite/forensics/bundle.py: made on the box when a run fails, rejects or hangs
FIRST = ("verdicts.json", "manifest.json")


def fetch_order(path: str) -> tuple[int, str]:
    """Evidence bundles, then the verdicts and the manifest, then the rest in the host's order."""
    if "/" not in path and path.startswith(EVIDENCE_PREFIX):
        return 0, path
    return (1, path) if path in FIRST else (2, "")


# argv: run dir. Prints [[relative path, size, sha256], ...] for every regular file, sorted.
LIST_PROGRAM = r"""
import hashlib, json, os, sys
root = sys.argv[1]
out = []
for d, dirs, files in os.walk(root):
    dirs.sort()
    for name in sorted(files):
        p = os.path.join(d, name)
        if not os.path.isfile(p) or os.path.islink(p):
            continue
        h = hashlib.sha256()
        with open(p, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        out.append([os.path.relpath(p, root), os.path.getsize(p), h.hexdigest()])
print(json.dumps(out))
"""


@dataclass(frozen=True)
class RemoteFile:
    path: str
    """Relative to the run directory, POSIX separators."""
    size: int
    sha256: str


@dataclass
class FetchReport:
    local_dir: Path
    files: list[RemoteFile]
    downloaded: int = 0
    skipped: int = 0
    resumed: int = 0
    bytes_moved: int = 0
    left_on_host: list[RemoteFile] = field(default_factory=list)
    """Regenerable exports not fetched (FETCH_EXPORTS=1 fetches them)."""


# An export that the laptop can make again from a file fetched beside it: (its suffix, the source's).
# `nsys export --type sqlite rank_0.nsys-rep`, often larger than the report
REGENERABLE = ((".sqlite", ".nsys-rep"),)


def regenerable(files: list[RemoteFile]) -> list[RemoteFile]:
    """The listed files that are exports of another listed file (an nsys SQLite beside its report)."""
    listed = {f.path for f in files}
    out = []
    for f in files:
        for suffix, source in REGENERABLE:
            if f.path.endswith(suffix) and f.path[: -len(suffix)] + source in listed:
                out.append(f)
    return out


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(CHUNK), b""):
            h.update(block)
    return h.hexdigest()


def list_remote(remote: Remote, run_dir: str) -> list[RemoteFile]:
    r = remote.run([*HOST_PYTHON, "-c", LIST_PROGRAM, run_dir], what=f"cannot list {run_dir}")
    return [RemoteFile(p, int(s), h) for p, s, h in json.loads(r.stdout.strip().splitlines()[-1])]


def safe_local_path(root: Path, rel: str) -> Path:
    """The local path of a listed file; refuses anything that would land outside the run directory."""
    parts = rel.split("/")
    if rel.startswith("/") or any(p in ("", "..") for p in parts):
        raise ValueError(f"refusing the remote path {rel!r}: it leaves the run directory")
    return root.joinpath(*parts)


def download(remote: Remote, src: str, dest: Path, size: int) -> tuple[int, bool]:
    """Copy src to dest via `<dest>.part`, resuming a partial one; returns (bytes moved, resumed?)."""
    part = dest.with_name(dest.name + ".part")
    start = part.stat().st_size if part.exists() else 0
    if start > size:
        part.unlink()
        start = 0
    moved = 0
    sftp = remote.sftp()
    with sftp.open(src, "rb") as fsrc, open(part, "ab") as fdst:
        fsrc.seek(start)
        # Every read request in flight at once from the resume point on: without it each 32 KiB
        # costs a round trip (~320 KB/s at 100 ms), hours for gigabytes of traces on the bill.
        fsrc.prefetch(size)
        while True:
            block = fsrc.read(CHUNK)
            if not block:
                break
            fdst.write(block)
            moved += len(block)
    return moved, start > 0


def fetch_run(remote: Remote, run_dir: str, dest_base: Path, say=print, exports: bool = False) -> FetchReport:
    """Mirror the host's run directory into dest_base/<run-id>/; checked file by file. Regenerable
    exports (nsys SQLite beside its report) stay on the host unless `exports`."""
    listed = list_remote(remote, run_dir)
    left = [] if exports else regenerable(listed)
    # a failed run's evidence bundle first, then its verdicts: a connection lost mid-fetch still leaves
    # what the provider's ticket needs
    files = sorted((f for f in listed if f not in left), key=lambda f: fetch_order(f.path))
    local = Path(dest_base) / posixpath.basename(run_dir.rstrip("/"))
    local.mkdir(parents=True, exist_ok=True)
    report = FetchReport(local_dir=local, files=files, left_on_host=left)
    total = sum(f.size for f in files)
    say(f"fetching {len(files)} files ({total / 1e6:.1f} MB) into {local}")
    if left:
        say(
            f"left on the host: {len(left)} regenerable export(s) ({sum(f.size for f in left) / 1e6:.1f} MB, "
            "e.g. nsys export --type sqlite raw/profile/rank_0.nsys-rep); FETCH_EXPORTS=1 fetches them"
        )
    if files and files[0].path.startswith(EVIDENCE_PREFIX):
        say(f"the run failed: its evidence bundle {files[0].path} comes first")
    for f in files:
        dest = safe_local_path(local, f.path)
        dest.parent.mkdir(parents=True, exist_ok=True)
        if dest.exists() and dest.stat().st_size == f.size and sha256_file(dest) == f.sha256:
            report.skipped += 1
            continue
        src = posixpath.join(run_dir, f.path)
        for attempt in (1, 2):
            moved, resumed = download(remote, src, dest, f.size)
            report.bytes_moved += moved
            report.resumed += resumed
            part = dest.with_name(dest.name + ".part")
            if part.stat().st_size == f.size and sha256_file(part) == f.sha256:
                part.replace(dest)
                report.downloaded += 1
                break
            part.unlink()  # a resumed tail that does not match: start this file over
            if attempt == 2:
                raise RemoteError(
                    remote.label,
                    f"{f.path}: sha256 differs from the host's after two downloads",
                    hint="the file may still be changing on the host; rerun when the run has finished",
                )
    say(
        f"fetched: {report.downloaded} downloaded ({report.resumed} resumed), {report.skipped} already here, "
        f"{report.bytes_moved / 1e6:.1f} MB moved; sizes and sha256 checked"
    )
    return report
