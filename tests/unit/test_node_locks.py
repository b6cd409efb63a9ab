"""The run lock across the nodes of make remote HOSTS= (provisioning/job/hostlock.py, group.py,
cluster/node_lines.py): the lock program run for real here (a second start of the same job passes, another
job is refused), the refusal naming the node, the job's own lines giving the other nodes' locks back over
ssh, run by sh before the job says it has ended."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys

from provisioning.cluster.node_lines import release_node_locks_lines
from provisioning.job import hostlock, jobs
from suite.cluster.multinode import parse_node


def take(base, job_id: str) -> dict:
    """LOCK_PROGRAM as the host runs it (this machine's python3 standing in for the node's)."""
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            hostlock.LOCK_PROGRAM,
            str(base),
            json.dumps({"by": "me@laptop", "job_id": job_id}),
            str(hostlock.LOCK_STALE_S),
        ],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_node_on_the_first_nodes_storage_takes_the_same_jobs_lock_again(tmp_path):
    first = take(tmp_path, "20261201T130000Z-aaaa")
    # node b, whose folder is the first node's (shared storage)
    again = take(tmp_path, "20261201T130000Z-aaaa")
    assert first["acquired"] and again["acquired"]
    assert (tmp_path / "jobs" / "lock" / "job_id").read_text() == "20261201T130000Z-aaaa\n"


def test_a_node_running_another_job_refuses_the_run_naming_the_node(tmp_path):
    assert take(tmp_path, "20261201T130000Z-aaaa")["acquired"]
    answer = take(tmp_path, "20261201T131500Z-bbbb")
    assert answer["acquired"] is False and answer["holder"]["job_id"] == "20261201T130000Z-aaaa"
    error = hostlock.busy("root@gpu-b", answer, "/root/cardtime", role="node")
    assert str(error).splitlines() == [
        "node root@gpu-b: the node is busy: me@laptop is starting or running job 20261201T130000Z-aaaa (0 "
        "min ago)",
        "  next: wait for it (`make remote-status HOST=root@gpu-b`); if that start was abandoned, remove the "
        "lock on the host: rm -rf /root/cardtime/jobs/lock",
    ]
    assert str(hostlock.busy("root@gpu-b", answer, "/b")).startswith(
        "root@gpu-b: the host is busy: me@laptop"
    )


def test_the_job_gives_the_other_nodes_locks_back_over_ssh_before_it_says_it_ended(tmp_path):
    nodes = [parse_node("root@gpu-b:2222"), parse_node("gpu-c")]
    lines = release_node_locks_lines(nodes, "/w", "j1", "/etc/cluster_ssh").splitlines()
    assert len(lines) == 2
    release = shlex.join(jobs.release_lock_argv("/w/jobs", "j1"))
    assert shlex.split(lines[0]) == [
        "ssh",
        "-o",
        "ConnectTimeout=10",
        "-o",
        "BatchMode=yes",
        "-F",
        "/etc/cluster_ssh",
        "-p",
        "2222",
        "root@gpu-b",
        release,
        ">",
        "/dev/null",
        "2>&1",
        "<",
        "/dev/null",
        "||",
        "true",
    ]
    assert shlex.split(lines[1])[:-7] == [
        "ssh",
        "-o",
        "ConnectTimeout=10",
        "-o",
        "BatchMode=yes",
        "-F",
        "/etc/cluster_ssh",
        "gpu-c",
        release,
    ]
    # The job script, run for real by sh: its teardown runs after the suite's command and before the exit
    # file.
    job_dir = tmp_path / "jobs" / "j1"
    job_dir.mkdir(parents=True)
    teardown = (
        f"if [ -e {shlex.quote(str(job_dir / 'exit'))} ]; then echo late; else echo early; fi > "
        f"{tmp_path}/order\n"
    )
    (job_dir / "job.sh").write_text(
        jobs.job_script(str(job_dir), str(tmp_path), ["true"], {}, teardown=teardown)
    )
    subprocess.run(["sh", str(job_dir / "job.sh")], check=True, timeout=30)
    assert (tmp_path / "order").read_text() == "early\n" and (job_dir / "exit").read_text() == "0\n"


def test_the_other_nodes_locks_are_kept_fresh_while_the_job_lives_and_no_longer(tmp_path):
    """On node b the job's pid is not there to show the job alive: its lock is kept young by the job's
    heartbeat (hostlock.LOCK_STALE_S would break it otherwise), which stops when the job ends, or dies
    outright."""
    import os
    import signal
    import time

    node_b = tmp_path / "node-b"
    assert take(node_b, "j1")["acquired"]
    lock = node_b / "jobs" / "lock"
    old = time.time() - hostlock.LOCK_STALE_S - 60
    os.utime(lock, (old, old))
    beat = shlex.join(jobs.touch_lock_argv(str(node_b / "jobs"), "j1"))

    def job(argv: list[str]) -> tuple[subprocess.Popen, object]:
        job_dir = tmp_path / "jobs" / f"j{time.monotonic_ns()}"
        job_dir.mkdir(parents=True)
        (job_dir / "job.sh").write_text(
            jobs.job_script(str(job_dir), str(tmp_path), argv, {}, heartbeat=beat, heartbeat_s=0.2)
        )
        return subprocess.Popen(["sh", str(job_dir / "job.sh")], start_new_session=True), job_dir

    def age() -> float:
        return time.time() - lock.stat().st_mtime

    def stays_old(seconds: float = 0.7) -> bool:
        os.utime(lock, (old, old))
        time.sleep(seconds)
        return age() > hostlock.LOCK_STALE_S

    proc, _ = job(["sleep", "0.6"])
    time.sleep(0.4)
    assert age() < 5  # beaten while the run goes on
    assert proc.wait(timeout=30) == 0
    assert stays_old(), "the heartbeat outlived the job"
    # A job killed outright (SIGKILL: no teardown runs) stops beating at its next beat.
    proc, job_dir = job(["sleep", "30"])
    try:
        time.sleep(0.4)
        assert age() < 5
        os.kill(int((job_dir / "pid").read_text()), signal.SIGKILL)
        proc.wait(timeout=10)  # reaped: a zombie would still answer kill -0
        time.sleep(0.3)
        assert stays_old()
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
    # A lock this job no longer holds is left alone, and one given back is not made again (touch -c).
    (lock / "job_id").write_text("j9\n")
    os.utime(lock, (old, old))
    subprocess.run(["sh", "-c", beat], check=True, timeout=10)
    assert age() > hostlock.LOCK_STALE_S
    subprocess.run(jobs.release_lock_argv(str(node_b / "jobs"), "j9"), check=True, timeout=10)
    subprocess.run(
        ["sh", "-c", shlex.join(jobs.touch_lock_argv(str(node_b / "jobs"), "j9"))], check=True, timeout=10
    )
    assert not lock.exists()


def test_the_job_beats_every_other_node_over_ssh(tmp_path):
    from provisioning.cluster.node_lines import touch_node_locks_command

    nodes = [parse_node("root@gpu-b:2222"), parse_node("gpu-c")]
    command = touch_node_locks_command(nodes, "/w", "j1", "/etc/cluster_ssh")
    first, second = command.splitlines()
    touch = shlex.join(jobs.touch_lock_argv("/w/jobs", "j1"))
    assert shlex.split(first) == [
        "ssh",
        "-o",
        "ConnectTimeout=10",
        "-o",
        "BatchMode=yes",
        "-F",
        "/etc/cluster_ssh",
        "-p",
        "2222",
        "root@gpu-b",
        touch,
        ">",
        "/dev/null",
        "2>&1",
        "<",
        "/dev/null",
    ]
    assert shlex.split(second)[:7] == [
        "ssh",
        "-o",
        "ConnectTimeout=10",
        "-o",
        "BatchMode=yes",
        "-F",
        "/etc/cluster_ssh",
    ] and "gpu-c" in shlex.split(second)
    # A stale node lock without a heartbeat is broken by the next start (what the heartbeat prevents).
    import os
    import time

    assert take(tmp_path, "j1")["acquired"]
    old = time.time() - hostlock.LOCK_STALE_S - 60
    os.utime(tmp_path / "jobs" / "lock", (old, old))
    assert take(tmp_path, "j2")["acquired"]
