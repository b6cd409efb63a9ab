"""The host's jobs over a real sshd on 127.0.0.1 (jobs are tiny shell commands: seconds).

A finished run nobody fetched is found among every job and blocks a new run until FETCH=<id>
brings it back (or NEW_RUN=1); one run at a time per host, whichever laptop starts it (the
host's lock); following a job by its id never drifts to a later job.
"""

from __future__ import annotations

import io
import json
import sys
import threading
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from remote_loopback import git_repo, provisioning, sshd_available, start_sshd  # noqa: E402

from provisioning.job import hostlock, jobs  # noqa: E402
from provisioning.session.connection import Remote  # noqa: E402
from provisioning.session.hosts import parse_host  # noqa: E402

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.needs("sshd"),
    pytest.mark.skipif(not sshd_available(), reason="needs openssh-server (.ci/run installs it)"),
]


@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    server = start_sshd(tmp_path_factory.mktemp("sshd-jobs"))
    yield server
    server.stop()


@pytest.fixture()
def remote(sshd, tmp_path):
    kh = tmp_path / "known_hosts"
    kh.write_text(sshd.known_hosts_line())
    r = Remote.open(parse_host(sshd.host), key=str(sshd.client_key), known_hosts=kh)
    r.known_hosts_file = kh
    yield r
    r.close()


def suite_exit(run_dir: Path) -> int:
    """The suite's exit code for a run: 1 when a verdict failed, else 0."""
    verdicts = json.loads((run_dir / "verdicts.json").read_text())["verdicts"]
    assert verdicts, run_dir
    return 1 if any(v["status"] == "fail" for v in verdicts) else 0


def finished_job(remote: Remote, base: Path, run_dir: Path) -> str:
    """A job that records run_dir as its run and exits as the suite would have on it."""
    key = jobs.JobKey(commit="f" * 40, profile="gloo-cpu", stages="topology", runtime="host")
    job_id = jobs.new_job_id(key)
    jobs.start(
        remote,
        str(base),
        key,
        str(base),
        [
            "sh",
            "-c",
            'printf "%s\\n" "$1" > "$2"; exit "$3"',
            "sh",
            str(run_dir),
            f"{base}/jobs/{job_id}/LAST",
            str(suite_exit(run_dir)),
        ],
        use_tmux=False,
        job_id=job_id,
    )
    for _ in range(100):
        if jobs.status(remote, str(base), job_id=job_id).state == "finished":
            return job_id
        time.sleep(0.1)
    raise AssertionError(jobs.status(remote, str(base), job_id=job_id))


def test_an_unfetched_run_blocks_a_new_one_until_fetched_by_id(sshd, remote, tmp_path):
    from report_synthetic import build_run

    base = tmp_path / "host"
    run_dir = build_run(base / "runs" / "20261129T1630Z-box-gloo-cpu")
    job_id = finished_job(remote, base, run_dir)
    # Another commit (and other stages) than the finished run's: no re-attach, and no silent new run.
    repo = git_repo(tmp_path / "laptop")
    conn = [
        "--host",
        sshd.host,
        "--key",
        str(sshd.client_key),
        "--known-hosts",
        str(remote.known_hosts_file),
        "--remote-dir",
        str(base),
    ]
    r = provisioning("remote", *conn, "--profile", "gloo-cpu", "--runtime", "host", cwd=repo)
    assert r.returncode == 2, r.stderr
    assert "1 finished run(s) on the host were never fetched" in r.stderr and f"FETCH={job_id}" in r.stderr, (
        r.stderr
    )
    assert not (base / "code").exists()  # refused before shipping anything
    status = provisioning("status", *conn, cwd=repo)
    assert f"never fetched: job {job_id}" in status.stdout, status.stdout

    r = provisioning("remote", *conn, "--fetch", "no-such-job", cwd=repo)
    assert r.returncode == 2 and "no job no-such-job" in r.stderr and job_id in r.stderr, r.stderr
    r = provisioning("remote", *conn, "--fetch", "../../elsewhere", cwd=repo)
    assert r.returncode == 2 and "is not a job id" in r.stderr and "Traceback" not in r.stderr, r.stderr

    runs = tmp_path / "runs"
    r = provisioning("remote", *conn, "--fetch", job_id, "--runs-dir", str(runs), cwd=repo)
    assert r.returncode == suite_exit(run_dir), r.stderr
    local = runs / run_dir.name
    for p in run_dir.rglob("*"):
        if p.is_file():
            assert (local / p.relative_to(run_dir)).read_bytes() == p.read_bytes(), p
    assert (local / "report.html").is_file() and (base / "jobs" / job_id / "fetched").is_file()
    assert json.loads((local / "remote.json").read_text())["job"]["job_id"] == job_id
    status = provisioning("status", *conn, cwd=repo)
    assert "never fetched" not in status.stdout, status.stdout


def test_one_lock_per_host_whoever_asks(remote, tmp_path):
    base = str(tmp_path / "host")
    results: list[object] = []

    def take(job_id: str) -> None:
        mine = Remote.open(
            remote.spec,
            key=str(remote.conn.connect_kwargs["key_filename"][0]),
            known_hosts=remote.known_hosts_file,
        )
        try:
            results.append(hostlock.acquire(mine, base, job_id, {"by": job_id}))
        except hostlock.HostBusy as e:
            results.append(e)
        finally:
            mine.close()

    laptops = [threading.Thread(target=take, args=(f"J{i}",)) for i in range(3)]
    for t in laptops:
        t.start()
    for t in laptops:
        t.join(timeout=60)
    locks = [r for r in results if isinstance(r, hostlock.Lock)]
    busy = [r for r in results if isinstance(r, hostlock.HostBusy)]
    assert len(results) == 3 and len(locks) == 1 and len(busy) == 2, results
    assert all(f"job {locks[0].job_id}" in str(b) and "rm -rf" in str(b) for b in busy)
    # The holder's job runs and ends: its script gives the lock back, and the next start goes through.
    key = jobs.JobKey(commit="a" * 40, profile="gloo-cpu", stages="", runtime="host")
    jobs.start(remote, base, key, base, ["true"], use_tmux=False, job_id=locks[0].job_id)
    for _ in range(100):
        if not Path(base, "jobs", "lock").exists():
            break
        time.sleep(0.1)
    assert not Path(base, "jobs", "lock").exists(), "the finished job kept the lock"
    assert hostlock.acquire(remote, base, "J9", {"by": "J9"}).job_id == "J9"
    # A lock whose job died (its pid gone, no exit code) is stale and broken.
    Path(base, "jobs", "J9").mkdir()
    Path(base, "jobs", "J9", "pid").write_text("999999999\n")
    assert hostlock.acquire(remote, base, "J10", {"by": "J10"}).job_id == "J10"
    with pytest.raises(hostlock.HostBusy):
        hostlock.acquire(remote, base, "J11", {"by": "J11"})  # J10 has not started yet: held


def test_follow_by_id_never_takes_a_later_job(remote, tmp_path):
    from provisioning.job.follow import follow
    from provisioning.session.steps import Steps

    base = tmp_path / "host"
    key = jobs.JobKey(commit="b" * 40, profile="gloo-cpu", stages="", runtime="host")
    first = jobs.start(
        remote,
        str(base),
        key,
        str(base),
        ["sh", "-c", "sleep 2; echo first job; exit 1"],
        use_tmux=False,
        job_id="A-first",
    )
    jobs.start(
        remote,
        str(base),
        key,
        str(base),
        ["sh", "-c", "echo second job; exit 0"],
        use_tmux=False,
        job_id="B-second",
    )
    assert (base / "jobs" / "current").read_text().strip() == "B-second"
    out = io.StringIO()
    st = follow([remote], lambda: remote, str(base), first, Steps(out).say, interval_s=0.2)
    assert st.job["job_id"] == "A-first" and st.exit_code == 1
    assert "first job" in out.getvalue() and "second job" not in out.getvalue()
