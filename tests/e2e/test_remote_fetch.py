"""Over a real sshd on 127.0.0.1: fetch resumes a partial file, re-downloads a corrupt one, skips
what is already here, refuses paths that leave the run directory; following a detached job
survives the SSH connection being cut (sshd's session processes killed) by reconnecting."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from remote_loopback import DelayProxy, sshd_available, start_sshd  # noqa: E402

from provisioning.job.fetch import fetch_run, safe_local_path  # noqa: E402
from provisioning.session.connection import Remote  # noqa: E402
from provisioning.session.hosts import parse_host  # noqa: E402

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.needs("sshd"),
    pytest.mark.skipif(not sshd_available(), reason="needs openssh-server (.ci/run installs it)"),
]


@pytest.fixture(scope="module")
def remote(tmp_path_factory):
    folder = tmp_path_factory.mktemp("sshd-fetch")
    server = start_sshd(folder / "sshd")
    kh = folder / "known_hosts"
    kh.write_text(server.known_hosts_line())
    r = Remote.open(parse_host(server.host), key=str(server.client_key), known_hosts=kh)
    r.server = server  # the test that cuts connections needs sshd's pid
    yield r
    r.close()
    server.stop()


RTT_S = 0.1  # a laptop in Europe, a box in the US


@pytest.fixture()
def far_remote(remote, tmp_path):
    """The same sshd behind a 100 ms round trip (50 ms each way)."""
    proxy = DelayProxy(remote.server.port, RTT_S / 2)
    kh = tmp_path / "known_hosts_far"
    kh.write_text(remote.server.known_hosts_line(proxy.port))
    r = Remote.open(
        parse_host(f"root@127.0.0.1:{proxy.port}"), key=str(remote.server.client_key), known_hosts=kh
    )
    r.proxy = proxy
    yield r
    r.close()
    proxy.stop()


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


def test_a_failed_runs_evidence_bundle_is_fetched_first(remote, tmp_path):
    run = tmp_path / "host" / "20261207T2210Z-box-gloo-cpu"
    (run / "raw" / "bandwidth").mkdir(parents=True)
    (run / "raw" / "bandwidth" / "aaa.log").write_text("first by name\n")
    (run / "bundle-20261207T2300Z.tar.gz").write_bytes(os.urandom(2048))
    (run / "verdicts.json").write_text("{}\n")
    said = []
    report = fetch_run(remote, str(run), tmp_path / "runs", say=said.append)
    assert [f.path for f in report.files][:2] == ["bundle-20261207T2300Z.tar.gz", "verdicts.json"]
    assert "the run failed: its evidence bundle bundle-20261207T2300Z.tar.gz comes first" in said
    assert (report.local_dir / "bundle-20261207T2300Z.tar.gz").read_bytes() == (
        run / "bundle-20261207T2300Z.tar.gz"
    ).read_bytes()


def test_paths_leaving_the_run_directory_are_refused(tmp_path):
    for bad in ("../x", "/etc/passwd", "a/../../b", "a//b"):
        with pytest.raises(ValueError, match="leaves the run directory"):
            safe_local_path(tmp_path, bad)
    assert safe_local_path(tmp_path, "raw/a b.log") == tmp_path / "raw" / "a b.log"


def session_pids(sshd_pid: int) -> list[int]:
    """sshd's per-connection processes: the children of the listening sshd."""
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(sshd_pid)], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def test_follow_reconnects_after_the_connection_is_cut(remote, tmp_path, monkeypatch):
    import io
    import threading

    from provisioning.job import follow as follow_mod
    from provisioning.job import jobs
    from provisioning.session.steps import Steps

    base = tmp_path / "host"
    base.mkdir()
    key = jobs.JobKey(commit="c" * 40, profile="gloo-cpu", stages="", runtime="host")
    # 3 s: the cut falls mid-job
    argv = [
        "sh",
        "-c",
        "for i in 1 2 3 4 5 6; do echo tick $i; sleep 0.5; done",
    ]
    job_id = jobs.start(remote, str(base), key, str(tmp_path), argv, use_tmux=False)
    monkeypatch.setattr(follow_mod, "RECONNECT_WAITS_S", (1, 1, 2, 2, 4, 4))
    out = io.StringIO()
    result = {}
    reconnect = lambda: (remote.close(), remote.connect(), remote)[2]  # noqa: E731
    t = threading.Thread(
        target=lambda: result.update(
            st=follow_mod.follow([remote], reconnect, str(base), job_id, Steps(out).say, interval_s=0.5)
        )
    )
    t.start()
    time.sleep(1.5)
    before = remote.conn.transport
    killed = session_pids(remote.server.proc.pid)
    for pid in killed:
        os.kill(pid, signal.SIGKILL)  # the SSH connection drops, as on a flaky network
    t.join(timeout=90)
    assert killed and not t.is_alive()
    text = out.getvalue()
    # A new SSH connection carried on: re-opened by the next status poll, or after a
    # "connection lost … reconnecting" when the cut fell inside a command.
    assert remote.conn.transport is not before and not before.is_active()
    assert result["st"].state == "finished" and result["st"].exit_code == 0, text
    assert "tick 6" in text  # the log read on after reconnecting, nothing lost


def test_fetch_is_not_bound_by_round_trips(far_remote, tmp_path):
    """2 MiB read 32 KiB per round trip is 64 round trips, 6.4 s at 100 ms whatever the CPU: a
    pipelined fetch (resumed half-way, as after a drop) finishes in a few round trips."""
    run = tmp_path / "host" / "20261129T1630Z-far-gloo-cpu"
    run.mkdir(parents=True)
    data = os.urandom(4 * 1024**2)
    (run / "trace.bin").write_bytes(data)
    laptop = tmp_path / "runs"
    (laptop / run.name).mkdir(parents=True)
    (laptop / run.name / "trace.bin.part").write_bytes(data[: 2 * 1024**2])
    far_remote.connect()
    far_remote.sftp()  # connection set-up is not what is measured
    start = time.monotonic()
    report = fetch_run(far_remote, str(run), laptop, say=lambda s: None)
    seconds = time.monotonic() - start
    assert (laptop / run.name / "trace.bin").read_bytes() == data
    assert report.resumed == 1 and report.bytes_moved == 2 * 1024**2
    serial_floor_s = 2 * 1024**2 / 32768 * RTT_S
    assert seconds < serial_floor_s / 2, (
        f"{seconds:.1f} s: one round trip per 32 KiB request (floor {serial_floor_s:.1f} s)"
    )


def test_regenerable_exports_stay_on_the_host_unless_asked(remote, tmp_path):
    run = tmp_path / "host" / "20261129T1630Z-box-nccl-gpu"
    (run / "raw" / "profile").mkdir(parents=True)
    (run / "raw" / "profile" / "rank_0.nsys-rep").write_bytes(b"rep")
    (run / "raw" / "profile" / "rank_0.sqlite").write_bytes(b"sqlite export")
    (run / "raw" / "profile" / "lonely.sqlite").write_bytes(b"no report beside it: not regenerable")
    laptop = tmp_path / "runs"
    said = []
    report = fetch_run(remote, str(run), laptop, say=said.append)
    local = laptop / run.name / "raw" / "profile"
    assert sorted(p.name for p in local.iterdir()) == ["lonely.sqlite", "rank_0.nsys-rep"]
    assert [f.path for f in report.left_on_host] == ["raw/profile/rank_0.sqlite"]
    assert any("FETCH_EXPORTS=1" in line for line in said)
    again = fetch_run(remote, str(run), laptop, say=said.append, exports=True)
    assert (again.downloaded, again.skipped) == (1, 2) and (
        local / "rank_0.sqlite"
    ).read_bytes() == b"sqlite export"


def test_keepalive_flows_on_an_idle_connection(far_remote, monkeypatch):
    """A relay or NAT drops an idle TCP connection: the client sends a keepalive on its own."""
    from provisioning.session import connection

    monkeypatch.setattr(connection, "KEEPALIVE_S", 1)
    far_remote.close()
    far_remote.connect()
    time.sleep(1.0)  # the handshake's last bytes in flight
    before = far_remote.proxy.client_bytes
    time.sleep(3.5)
    assert far_remote.proxy.client_bytes > before, "no byte from the client in 3.5 s of idling"


def test_a_poll_on_a_dead_link_is_a_lost_connection_in_bounded_time(far_remote, monkeypatch):
    """The laptop slept or the link went quiet without a reset: the status poll gives up in its
    timeout as a lost connection (which follow() retries), not after TCP's many minutes."""
    import threading

    from provisioning.job import jobs
    from provisioning.session import connection
    from provisioning.session.connection import ConnectionLost

    monkeypatch.setattr(jobs, "POLL_TIMEOUT_S", 2.0)
    # the watchdog's grace after the timeout: 5 s by default
    monkeypatch.setattr(connection, "WATCHDOG_GRACE_S", 1.0)
    base = far_remote.run(["mktemp", "-d"]).stdout.strip()
    assert jobs.status(far_remote, base).job is None
    far_remote.proxy.pause()
    outcome = {}

    def poll():
        try:
            jobs.status(far_remote, base)
            outcome["result"] = "answered"
        except ConnectionLost as e:
            outcome["result"] = e
        except Exception as e:  # noqa: BLE001 - any other error is the failure reported below
            outcome["result"] = repr(e)

    t = threading.Thread(target=poll, daemon=True)
    start = time.monotonic()
    t.start()
    t.join(timeout=30)
    far_remote.proxy.resume()
    assert not t.is_alive(), "the poll blocked for 30 s on a dead link"
    assert isinstance(outcome["result"], ConnectionLost), outcome
    assert time.monotonic() - start < 15 and "connection treated as lost" in str(outcome["result"])
    assert jobs.status(far_remote, base).job is None  # the next call reconnects and answers
