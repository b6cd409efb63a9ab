"""Fetch rate over SFTP: provisioning.job.fetch against paramiko's plain `get()`, through a loopback
sshd behind a user-space relay that adds a round trip (tests/e2e/remote_loopback.DelayProxy)."""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

SIZE = 32 * 1024**2
RTTS_S = (0.0, 0.1)  # loopback as it is; a laptop an ocean away from the box


def fetch_rates() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent / "e2e"))
    from remote_loopback import DelayProxy, sshd_available, start_sshd

    from provisioning.job.fetch import fetch_run
    from provisioning.session.connection import Remote
    from provisioning.session.hosts import parse_host

    if not sshd_available():
        print("fetch rate: skipped (needs openssh-server)")
        return
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        server = start_sshd(tmp / "sshd")
        run = tmp / "host" / "20261129T1630Z-bench-gloo-cpu"
        run.mkdir(parents=True)
        (run / "rank_0.nsys-rep").write_bytes(os.urandom(SIZE))
        try:
            for rtt in RTTS_S:
                proxy = DelayProxy(server.port, rtt / 2) if rtt else None
                port = proxy.port if proxy else server.port
                kh = tmp / f"known_hosts_{port}"
                kh.write_text(server.known_hosts_line(port))
                remote = Remote.open(
                    parse_host(f"root@127.0.0.1:{port}"), key=str(server.client_key), known_hosts=kh
                )
                try:
                    sftp = remote.sftp()
                    start = time.monotonic()
                    sftp.get(str(run / "rank_0.nsys-rep"), str(tmp / "plain-get"))
                    plain = SIZE / (time.monotonic() - start) / 1e6
                    start = time.monotonic()
                    fetch_run(remote, str(run), tmp / f"runs-{port}", say=lambda s: None)
                    ours = SIZE / (time.monotonic() - start) / 1e6
                finally:
                    remote.close()
                    if proxy:
                        proxy.stop()
                print(
                    f"fetch rate, {SIZE >> 20} MiB at {rtt * 1000:.0f} ms round trip: fetch_run {ours:.1f} "
                    f"MB/s, "
                    f"plain sftp get() {plain:.1f} MB/s (fetch_run also hashes every file on the host and "
                    f"here; target: ≥ 0.5 × get())"
                )
        finally:
            server.stop()
