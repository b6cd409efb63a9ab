"""`make remote` end to end against a real sshd and a real S3-compatible server on 127.0.0.1.

The "rented host" is this machine reached through sshd on a free loopback port, with its own
keys and an audit ForceCommand that logs every command line and environment the laptop causes
(tests/e2e/remote_loopback.py). The story, in order:

  1. `make remote … RUNTIME=host PROFILE=gloo-cpu ARCHIVE=s3://…` from a fresh commit: host key
     accepted on first use (ACCEPT_NEW_HOST=1), code shipped by git bundle, venv, detached run;
  2. the laptop side is SIGKILLed mid-run; the run goes on on the host;
  3. `make remote-status` shows it; `make remote` again re-attaches (no second run), follows it
     to the end, fetches it (sha256 checked), renders the report and archives it;
  4. every object in the bucket carries the sha256 of its local file; the audit log shows no
     cloud credential ever reached the host;
  5. a third `make remote` re-attaches to the finished run and uploads nothing new.

Cost: the host-side venv is installed once per pyproject.toml and installer (kept in a cache folder
across test sessions, as it is kept on a real host: remote_loopback.host_venv_cache); then ~1–2 minutes
on a 2-core machine.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from remote_loopback import (  # noqa: E402
    clean_env,
    fake_credentials,
    host_venv_cache,
    make_repo,
    sshd_available,
    start_moto,
    start_sshd,
)

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.needs("sshd"),
    pytest.mark.timeout(3000),
    pytest.mark.skipif(not sshd_available(), reason="needs openssh-server (.ci/run installs it)"),
]

ROOT = Path(__file__).resolve().parents[2]
VENV = ROOT / ".venv"
BUCKET = "cardtime-e2e"


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def pick_stages() -> str:
    """One cheap stage: topology (~5–15 s on gloo-cpu here), long enough to cut the laptop off mid-run."""
    from suite import stages

    present = stages.available()
    return "topology" if "topology" in present else ",".join(present[:1])


def kill_jobs(remote_dir: Path) -> None:
    for pid_file in remote_dir.glob("jobs/*/pid"):
        try:
            os.killpg(int(pid_file.read_text()), signal.SIGTERM)
        except (OSError, ValueError):
            pass


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    base = tmp_path_factory.mktemp("remote")
    sshd = start_sshd(base / "sshd")
    moto = start_moto(VENV / "bin")
    remote_dir = base / "host" / "cardtime"
    remote_dir.mkdir(parents=True)
    # the host keeps its venvs across runs; so do the tests
    (remote_dir / "venvs").symlink_to(host_venv_cache())
    yield {
        "base": base,
        "sshd": sshd,
        "moto": moto,
        "remote_dir": remote_dir,
        "repo": make_repo(base / "laptop"),
    }
    kill_jobs(remote_dir)
    sshd.stop()
    moto.stop()


def make_args(world, target: str, **extra: str) -> list[str]:
    sshd = world["sshd"]
    args = [
        "make",
        "--no-print-directory",
        "-C",
        str(world["repo"]),
        target,
        f"VENV={VENV}",
        "-o",
        f"{VENV}/.installed",  # use this checkout's venv; never rebuild it
        f"HOST={sshd.host}",
        f"KEY={sshd.client_key}",
        f"KNOWN_HOSTS={world['base'] / 'known_hosts'}",
        f"REMOTE_DIR={world['remote_dir']}",
    ]
    return args + [f"{k}={v}" for k, v in extra.items()]


def remote_args(world, stages: str) -> dict[str, str]:
    return {
        "RUNTIME": "host",
        "PROFILE": "gloo-cpu",
        "STAGES": stages,
        "ACCEPT_NEW_HOST": "1",
        "ARCHIVE": f"s3://{BUCKET}/runs",
    }


def env_for(world) -> dict[str, str]:
    return clean_env(**fake_credentials(world["moto"].endpoint))


def current_job(remote_dir: Path) -> Path | None:
    current = remote_dir / "jobs" / "current"
    return remote_dir / "jobs" / current.read_text().strip() if current.exists() else None


def expected_exit(run_dir: Path) -> int:
    """What `make remote` must exit with for this run: 1 when a verdict failed, else 0 (never 2)."""
    verdicts = json.loads((run_dir / "verdicts.json").read_text())["verdicts"]
    assert verdicts, f"{run_dir}: no verdicts"
    return 1 if any(v["status"] == "fail" for v in verdicts) else 0


def test_remote_end_to_end_with_reattach(world):
    import boto3

    env = env_for(world)
    s3 = boto3.client(
        "s3",
        endpoint_url=world["moto"].endpoint,
        region_name="us-east-1",
        aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
    )
    s3.create_bucket(Bucket=BUCKET)
    stages = pick_stages()
    remote_dir = world["remote_dir"]
    args = make_args(world, "remote", **remote_args(world, stages))

    # 1–2. First `make remote`; SIGKILL it (the whole laptop-side process group) once the run is going.
    log1 = world["base"] / "first.log"
    with open(log1, "w") as out:
        first = subprocess.Popen(args, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 2400  # the first install of the host's venv
    job_dir = None
    while time.monotonic() < deadline and first.poll() is None:
        job_dir = current_job(remote_dir)
        if job_dir and (job_dir / "pid").exists() and (job_dir / "LAST").exists():
            break
        time.sleep(0.2)
    assert first.poll() is None, f"make remote ended before the run started:\n{log1.read_text()}"
    assert job_dir is not None and (job_dir / "pid").exists(), log1.read_text()
    job_pid = int((job_dir / "pid").read_text())
    job_env = (
        Path(f"/proc/{job_pid}/environ").read_bytes().decode(errors="replace")
        if Path(f"/proc/{job_pid}/environ").exists()
        else ""
    )
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    killed_mid_run = not (job_dir / "exit").exists()
    first_out = log1.read_text()
    assert "ACCEPT_NEW_HOST: trusting [127.0.0.1]" in first_out
    assert "shipped by bundle" in first_out, first_out
    assert killed_mid_run, "the run finished before the laptop side could be killed: pick longer stages"
    time.sleep(1.0)
    os.kill(job_pid, 0)  # the detached run survived the laptop's death (raises if it did not)
    assert "AWS_" not in job_env and "SENTINEL" not in job_env.upper()

    # 3. Status, then re-attach and finish.
    status = subprocess.run(
        make_args(world, "remote-status"), env=env, capture_output=True, text=True, timeout=120
    )
    assert status.returncode == 0, status.stdout + status.stderr  # running or finished: both 0
    assert job_dir.name in status.stdout
    assert re.search(r": (running|starting|finished)", status.stdout), status.stdout

    second = subprocess.run(args, env=env, capture_output=True, text=True, timeout=900)
    out2 = second.stdout + second.stderr
    assert "re-attaching" in out2, out2
    assert len(list((remote_dir / "jobs").glob("*/job.json"))) == 1, "a second run was started"
    remote_runs = [p for p in (remote_dir / "runs").iterdir() if p.is_dir()]
    assert len(remote_runs) == 1
    remote_run = remote_runs[0]
    assert second.returncode == expected_exit(remote_run), out2
    assert (job_dir / "exit").read_text().strip() == str(second.returncode)

    # Fetched: the same files, byte for byte; the laptop's record names the host key accepted on first use.
    local_run = world["repo"] / "runs" / remote_run.name
    remote_files = {
        p.relative_to(remote_run).as_posix(): sha256(p) for p in remote_run.rglob("*") if p.is_file()
    }
    assert remote_files and "manifest.json" in remote_files
    for rel, digest in remote_files.items():
        assert sha256(local_run / rel) == digest, rel
    record = json.loads((local_run / "remote.json").read_text())
    host_blob = world["sshd"].host_pub.split()[1]
    import base64

    expected_fp = "SHA256:" + base64.b64encode(
        hashlib.sha256(base64.b64decode(host_blob)).digest()
    ).decode().rstrip("=")
    assert record["host_key"]["fingerprint"] == expected_fp
    # Accepted on first use by the first (killed) `make remote`: recorded with the job on the host.
    assert record["job"]["host_key"] == {**record["host_key"], "accepted_on_first_use": True}
    assert record["job"]["code_shipped_by"] == "bundle"
    assert record["reattached"] is True
    assert (local_run / "report.html").is_file(), out2
    assert f"report: {local_run / 'report.html'}" in out2

    # 4. Every local file is in the bucket with its sha256 (metadata and content), plus the manifest.
    prefix = f"runs/{remote_run.name}/"
    listed = s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix)["Contents"]
    keys = {o["Key"][len(prefix) :] for o in listed}
    local_files = {p.relative_to(local_run).as_posix(): p for p in local_run.rglob("*") if p.is_file()}
    assert keys == set(local_files) | {"archive-manifest.json"}
    for rel, path in local_files.items():
        obj = s3.get_object(Bucket=BUCKET, Key=prefix + rel)
        body = obj["Body"].read()
        assert hashlib.sha256(body).hexdigest() == sha256(path) == obj["Metadata"]["sha256"], rel
    manifest = json.loads(s3.get_object(Bucket=BUCKET, Key=prefix + "archive-manifest.json")["Body"].read())
    assert {f["path"]: f["sha256"] for f in manifest["files"]} == {
        rel: sha256(p) for rel, p in local_files.items()
    }

    # No cloud credential reached the host: not in any command line, not in any session's environment.
    audit = world["sshd"].audit()
    assert audit.count("\nCMD ") + audit.startswith("CMD ") > 10
    for secret in (
        "AWS_",
        env["AWS_ACCESS_KEY_ID"],
        env["AWS_SECRET_ACCESS_KEY"],
        "127.0.0.1:" + str(world["moto"].port),
    ):
        assert secret not in audit, f"{secret!r} reached the host"

    # 5. Once more: re-attaches to the finished run, fetches nothing new, uploads nothing new.
    third = subprocess.run(args, env=env, capture_output=True, text=True, timeout=600)
    out3 = third.stdout + third.stderr
    assert third.returncode == second.returncode, out3
    assert "re-attaching" in out3 and ": finished" in out3
    assert re.search(r"fetched: 0 downloaded .* already here", out3), out3
    uploaded = re.search(r"archived (\d+) files to s3://.*: (\d+) uploaded", out3)
    assert uploaded and uploaded.group(2) == "0", out3
    assert len(list((remote_dir / "jobs").glob("*/job.json"))) == 1


def test_a_run_that_died_on_the_host_is_resumed(world):
    """NEW_RUN=1 starts a second run; the host kills it (as an OOM killer or a reboot would); the
    next `make remote` finds it died and resumes the same run directory instead of starting over."""
    env = env_for(world)
    remote_dir = world["remote_dir"]
    old_job = current_job(remote_dir)
    args = make_args(world, "remote", **remote_args(world, pick_stages()))
    log = world["base"] / "died.log"
    with open(log, "w") as out:
        laptop = subprocess.Popen(
            args + ["NEW_RUN=1"], env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    deadline = time.monotonic() + 600
    job_dir = None
    while time.monotonic() < deadline and laptop.poll() is None:
        job_dir = current_job(remote_dir)
        if job_dir not in (None, old_job) and (job_dir / "pid").exists() and (job_dir / "LAST").exists():
            break
        time.sleep(0.2)
    assert job_dir not in (None, old_job), log.read_text()
    os.killpg(int((job_dir / "pid").read_text()), signal.SIGKILL)  # the run dies on the host
    try:
        laptop.wait(timeout=300)
    finally:
        if laptop.poll() is None:
            os.killpg(laptop.pid, signal.SIGKILL)
    died_out = log.read_text()
    assert laptop.returncode == 2 and "stopped without an exit code" in died_out, died_out
    run_dir = (job_dir / "LAST").read_text().strip()

    again = subprocess.run(args, env=env, capture_output=True, text=True, timeout=900)
    out = again.stdout + again.stderr
    assert again.returncode == expected_exit(
        Path(current_job(remote_dir).joinpath("LAST").read_text().strip())
    ), out
    assert f"resuming {run_dir}" in out, out
    resumed_job = current_job(remote_dir)
    assert resumed_job not in (job_dir, old_job)
    assert (resumed_job / "LAST").read_text().strip() == run_dir  # the same run directory, continued
    manifest = json.loads(Path(run_dir, "manifest.json").read_text())
    assert manifest["stages"] and all(s["status"] == "complete" for s in manifest["stages"].values())
    assert json.loads((resumed_job / "job.json").read_text())["resumes"] == run_dir
