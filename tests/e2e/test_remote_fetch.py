"""provisioning.fetch over a real sshd on 127.0.0.1: resumes a partial file, re-downloads a
corrupt one, skips what is already here, and refuses paths that leave the run directory."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from remote_loopback import sshd_available, start_sshd  # noqa: E402

from provisioning.connection import Remote  # noqa: E402
from provisioning.fetch import fetch_run, safe_local_path  # noqa: E402
from provisioning.hosts import parse_host  # noqa: E402

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(not sshd_available(), reason="needs openssh-server (.ci/run installs it)")]


@pytest.fixture(scope="module")
def remote(tmp_path_factory):
    folder = tmp_path_factory.mktemp("sshd-fetch")
    server = start_sshd(folder / "sshd")
    kh = folder / "known_hosts"
    kh.write_text(server.known_hosts_line())
    r = Remote.open(parse_host(server.host), key=str(server.client_key), known_hosts=kh)
    yield r
    r.close()
    server.stop()


def test_fetch_resumes_checks_and_skips(remote, tmp_path):
    run = tmp_path / "host" / "20261129T1630Z-box-gloo-cpu"
    (run / "raw" / "bandwidth").mkdir(parents=True)
    big = os.urandom(3 * 1024**2 + 123)
    (run / "raw" / "bandwidth" / "trace.bin").write_bytes(big)
    (run / "manifest.json").write_text('{"schema_version": 1}\n')
    (run / "raw" / "with space 'q'.log").write_text("x\n")
    laptop = tmp_path / "runs"
    local = laptop / run.name
    (local / "raw" / "bandwidth").mkdir(parents=True)
    # A connection dropped half-way through the big file, and a stale corrupt partial of another.
    (local / "raw" / "bandwidth" / "trace.bin.part").write_bytes(big[: 1024**2])
    (local / "manifest.json.part").write_bytes(b'{"schema_version": 9')

    report = fetch_run(remote, str(run), laptop, say=lambda s: None)
    assert report.local_dir == local
    for p in run.rglob("*"):
        if p.is_file():
            assert (local / p.relative_to(run)).read_bytes() == p.read_bytes()
    assert report.downloaded == 3 and report.resumed >= 1
    # 2 MiB + 123 B of the big file's rest, not all 3 MiB again.
    assert report.bytes_moved < len(big) + 100
    assert not list(local.rglob("*.part"))

    again = fetch_run(remote, str(run), laptop, say=lambda s: None)
    assert (again.downloaded, again.skipped, again.bytes_moved) == (0, 3, 0)


def test_paths_leaving_the_run_directory_are_refused(tmp_path):
    for bad in ("../x", "/etc/passwd", "a/../../b", "a//b"):
        with pytest.raises(ValueError, match="leaves the run directory"):
            safe_local_path(tmp_path, bad)
    assert safe_local_path(tmp_path, "raw/a b.log") == tmp_path / "raw" / "a b.log"
