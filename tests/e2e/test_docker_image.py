"""The CPU image built and run for real: the rehearsal inside a container, then `make remote RUNTIME=docker`.

A Docker engine on this machine (the running one, or dockerd started here), a Debian base made
locally (no registry is reachable: debootstrap once, `docker import`), docker/cpu.Dockerfile
built on it through the Docker SDK (provisioning/runtime/images.py), then:

  1. the rehearsal's cheap stages in the container, the run folder mounted: the run directory
     is checked on this side of the mount, and the container's settings (host IPC and network,
     the ulimits NCCL needs) are read back from the engine;
  2. the same engine driven over SSH (the loopback sshd of the remote tests), through the SSH
     session of a Fabric connection: a container started, followed and waited for;
  3. `make remote RUNTIME=docker` against that sshd: the host runs the suite in the image.

Cost on a 2-core machine: the first image build ~3–5 minutes (debootstrap ~45 s, cached under
/var/cache/cardtime; wheels cached there too), later builds seconds (.ci/run builds it before `make test`:
docker_engine.build_cpu_test_image); the runs ~1–2 minutes.
Skipped, with the reason, where no engine can be had.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from docker_engine import (  # noqa: E402
    BASE_IMAGE,
    CPU_TEST_IMAGE,
    EngineUnavailable,
    build_cpu_test_image,
    start_engine,
    stop_engine,
)

pytestmark = [pytest.mark.e2e, pytest.mark.needs("docker", "debian-base"), pytest.mark.timeout(1800)]

ROOT = Path(__file__).resolve().parents[2]
VENV = ROOT / ".venv"
IMAGE = CPU_TEST_IMAGE


def tree_commit() -> str:
    """HEAD of the tree the image is built from, asked of git here (the build asks through
    provisioning/runtime/images.py)."""
    return subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()


def cheap_stages() -> str:
    from suite import stages

    present = stages.available()
    return ",".join(s for s in ("topology", "bandwidth") if s in present)


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    from provisioning.runtime.engine import connect

    try:
        proc = start_engine(tmp_path_factory.mktemp("dockerd"))
    except EngineUnavailable as e:
        pytest.skip(f"no Docker engine: {e}")
    try:
        yield connect()
    finally:
        stop_engine(proc)


@pytest.fixture(scope="module")
def image(engine):
    lines: list[str] = []
    started = time.monotonic()
    try:
        image_id = build_cpu_test_image(engine, on_line=lines.append)
    except EngineUnavailable as e:
        pytest.skip(str(e))
    print(f"\nbuilt {IMAGE} in {time.monotonic() - started:.1f} s", file=sys.stderr)
    assert engine.images.get(IMAGE).id == image_id
    return IMAGE


@pytest.fixture(scope="module")
def containerized_run(engine, image, tmp_path_factory):
    """The rehearsal's cheap stages inside the image, the run folder mounted; (run_dir, log, container
    attrs)."""
    from provisioning.runtime import suite_container as container

    runs = tmp_path_factory.mktemp("runs")
    stages = cheap_stages()
    assert stages, "no cheap stage (topology, bandwidth) in suite/stages"
    args = [
        "run",
        "--profile",
        "gloo-cpu",
        "--stages",
        stages,
        "--out",
        str(runs),
        "--record-last",
        str(runs / "LAST"),
    ]
    run = container.start_suite(
        engine,
        image,
        container.RunSettings(gpus=False, mounts=(str(runs),)),
        args=args,
        name="cardtime-test-rehearsal",
    )
    try:
        log = list(container.follow(run))
        code = container.wait(run, timeout_s=900)
        run.reload()
        attrs = run.attrs
    finally:
        container.remove_suite(run)
    assert (runs / "LAST").exists(), "\n".join(log[-60:])
    run_dir = Path((runs / "LAST").read_text().strip())
    return {"run_dir": run_dir, "log": log, "code": code, "attrs": attrs, "stages": stages.split(",")}


def test_image_prints_versions_then_runs_the_suite(containerized_run):
    log = containerized_run["log"]
    text = "\n".join(log)
    assert log[0].startswith(f"cardtime image cpu (commit {tree_commit()})"), text[:2000]
    versions = dict(line.split(None, 1) for line in log[1:12] if line and not line.startswith("----"))
    assert versions["torch"].startswith("2.13.0+cpu"), versions
    assert versions["driver"] == "none" and versions["nsys"] == "none"  # a CPU image: said, not hidden
    assert any(line.startswith("---- python -m suite run --profile gloo-cpu") for line in log)


def test_rehearsal_in_container_leaves_a_complete_run_directory(containerized_run):
    import pandas as pd

    run_dir = containerized_run["run_dir"]
    assert containerized_run["code"] in (0, 1), "\n".join(containerized_run["log"][-40:])
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["profile_name"] == "gloo-cpu"
    # There is no .git inside: the commit is the image's CARDTIME_COMMIT, which must be the tree it was built
    # from.
    assert manifest["git"]["commit"] == tree_commit() != "unknown"
    assert manifest["versions"]["torch"].startswith("2.13.0")
    for stage in containerized_run["stages"]:
        assert manifest["stages"][stage]["status"] == "complete", (stage, manifest["stages"][stage])
        assert (run_dir / "raw" / stage).is_dir() and any((run_dir / "raw" / stage).iterdir()), stage
    rows = pd.read_parquet(run_dir / "results.parquet")
    assert set(containerized_run["stages"]) <= set(rows["stage"]), rows["stage"].unique()
    verdicts = json.loads((run_dir / "verdicts.json").read_text())["verdicts"]
    statuses = {v["stage"]: v["status"] for v in verdicts}
    assert set(containerized_run["stages"]) <= set(statuses)
    assert not [v for v in verdicts if v["status"] == "fail"], [v for v in verdicts if v["status"] == "fail"]


def test_cpu_container_settings(containerized_run):
    host = containerized_run["attrs"]["HostConfig"]
    assert host["IpcMode"] == "host" and host["NetworkMode"] == "host"
    limits = {u["Name"]: (u["Soft"], u["Hard"]) for u in host["Ulimits"]}
    assert limits == {"stack": (67108864, 67108864)}  # no memlock: a CPU run pins nothing
    assert not host.get("DeviceRequests")
    run_root = str(containerized_run["run_dir"].parent)
    assert f"{run_root}:{run_root}:rw" in host["Binds"]


def test_gpu_container_asks_for_what_docker_run_flags_say(engine, image, tmp_path):
    """Created, not started (no GPU here): the engine records `--gpus all --ipc=host --network=host
    --ulimit memlock=-1 --ulimit stack=67108864` and the run folder as a same-path volume."""
    from provisioning.runtime import suite_container as container

    created = container.create_suite(
        engine,
        image,
        container.RunSettings(gpus=True, mounts=(str(tmp_path),)),
        args=["run", "--profile", "nccl-gpu"],
        name="cardtime-test-gpu-settings",
    )
    try:
        host = engine.api.inspect_container(created.id)["HostConfig"]
    finally:
        container.remove_suite(created)
    assert host["IpcMode"] == "host" and host["NetworkMode"] == "host"
    limits = {u["Name"]: (u["Soft"], u["Hard"]) for u in host["Ulimits"]}
    assert limits == {"memlock": (-1, -1), "stack": (67108864, 67108864)}
    (request,) = host["DeviceRequests"]
    assert request["Count"] == -1 and request["Capabilities"] == [["gpu"]]
    assert host["Binds"] == [f"{tmp_path}:{tmp_path}:rw"]


def test_the_docker_run_line_and_the_sdk_ask_the_engine_for_the_same_container(engine, image, tmp_path):
    """The job's `docker run` flags (RUNTIME=docker) and start_suite's SDK arguments come from one
    RunSettings: `docker create` with the flags and create_suite must leave the same HostConfig on the
    engine."""
    from provisioning.runtime import suite_container as container

    settings = container.RunSettings(gpus=True, mounts=(str(tmp_path),), user="1000:1000")
    argv = container.docker_run_argv(image, settings, ["run"], name="cardtime-test-cli-settings")
    assert argv[:3] == ["docker", "run", "--rm"]
    cli = subprocess.run(["docker", "create", *argv[2:]], capture_output=True, text=True, timeout=60)
    assert cli.returncode == 0, cli.stderr
    sdk = container.create_suite(engine, image, settings, args=["run"], name="cardtime-test-sdk-settings")
    try:
        by_cli = engine.api.inspect_container("cardtime-test-cli-settings")
        by_sdk = engine.api.inspect_container(sdk.id)
    finally:
        container.remove_suite(sdk)
        container.remove_suite(engine.containers.get("cardtime-test-cli-settings"))
    keys = ("IpcMode", "NetworkMode", "Ulimits", "Binds")
    assert {k: by_cli["HostConfig"][k] for k in keys} == {k: by_sdk["HostConfig"][k] for k in keys}
    gpus = [
        [(r["Count"], r["Capabilities"]) for r in c["HostConfig"]["DeviceRequests"]] for c in (by_cli, by_sdk)
    ]
    assert gpus[0] == gpus[1] == [(-1, [["gpu"]])]
    assert by_cli["Config"]["User"] == by_sdk["Config"]["User"] == "1000:1000"
    assert sorted(by_cli["Config"]["Env"]) == sorted(by_sdk["Config"]["Env"])
    # --rm: the job's only
    assert by_cli["HostConfig"]["AutoRemove"] and not by_sdk["HostConfig"]["AutoRemove"]


def test_a_container_that_cannot_start_is_removed_and_the_error_says_what_to_do(engine, image, tmp_path):
    from provisioning.runtime import suite_container as container
    from provisioning.runtime.engine import EngineError

    with pytest.raises(EngineError, match="nvidia-container-toolkit|LimitMEMLOCK"):
        container.start_suite(
            engine,
            image,
            container.RunSettings(gpus=True, mounts=(str(tmp_path),)),
            args=["run"],
            name="cardtime-test-cannot-start",
        )
    assert container.find_suite(engine, "cardtime-test-cannot-start") is None


# ---------------------------------------------------------------- over SSH


@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    from remote_loopback import sshd_available, start_sshd

    if not sshd_available():
        pytest.skip("needs openssh-server (.ci/run installs it)")
    server = start_sshd(tmp_path_factory.mktemp("sshd"))
    yield server
    server.stop()


@pytest.mark.needs("sshd")
def test_engine_over_a_fabric_ssh_session(engine, image, sshd, tmp_path):
    """The SDK through the SSH session of a Fabric connection: each API call a `docker system dial-stdio`
    channel."""
    import fabric
    import paramiko

    from provisioning.runtime import suite_container as container
    from provisioning.runtime.engine import connect_over

    known = tmp_path / "known_hosts"
    known.write_text(sshd.known_hosts_line())
    conn = fabric.Connection(
        "127.0.0.1",
        user="root",
        port=sshd.port,
        connect_kwargs={"key_filename": str(sshd.client_key), "look_for_keys": False, "allow_agent": False},
    )
    conn.client.load_host_keys(str(known))
    conn.client.set_missing_host_key_policy(paramiko.RejectPolicy())
    try:
        client = connect_over(conn)
        assert client.images.get(image).id == engine.images.get(image).id
        run = container.start_suite(
            client,
            image,
            container.RunSettings(gpus=False, mounts=(str(tmp_path),)),
            args=["python", "-c", "import torch, sys; print('rank-free', torch.__version__); sys.exit(3)"],
            name="cardtime-test-over-ssh",
        )
        try:
            lines = list(container.follow(run))
            assert container.wait(run) == 3
        finally:
            container.remove_suite(run)
        assert any(line.startswith("rank-free 2.13.0") for line in lines), lines
    finally:
        conn.close()
    assert "docker system dial-stdio" in sshd.audit()  # it really went through sshd


def test_make_remote_runtime_docker(engine, image, sshd, tmp_path):
    """`make remote RUNTIME=docker`: the host (this machine, through sshd) runs the suite in the image.

    No registry is reachable, so the image is placed on the host the way a previous `make remote`
    leaves it: cardtime:<commit> (provisioning/runtime/remote_docker.py), built from this tree with that
    commit as CARDTIME_COMMIT (the last layer only: seconds), found there, not built again.
    """
    from remote_loopback import clean_env
    from test_remote_loopback import make_repo

    from provisioning.runtime import images

    repo = make_repo(tmp_path / "laptop")
    commit = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    tag = f"cardtime:{commit[:12]}"
    # The laptop repo's HEAD as CARDTIME_COMMIT, as remote_docker.image_setup has the host build it (the files
    # are this tree's).
    images.build_image(
        engine,
        ROOT,
        tag=tag,
        dockerfile=images.CPU_DOCKERFILE,
        buildargs={"BASE": BASE_IMAGE, **images.commit_buildargs(repo)},
        network_mode="host",
    )
    remote_dir = tmp_path / "host" / "cardtime"
    remote_dir.mkdir(parents=True)
    # the runtime path is the point here, gloo in the container is test 1's; health judges the host's kernel
    # log, which the job read on the host before the container started
    stages = "health,topology"
    args = [
        "make",
        "--no-print-directory",
        "-C",
        str(repo),
        "remote",
        f"VENV={VENV}",
        "-o",
        f"{VENV}/.installed",
        f"HOST={sshd.host}",
        f"KEY={sshd.client_key}",
        f"KNOWN_HOSTS={tmp_path / 'known_hosts'}",
        f"REMOTE_DIR={remote_dir}",
        "RUNTIME=docker",
        "PROFILE=gloo-cpu",
        f"STAGES={stages}",
        "ACCEPT_NEW_HOST=1",
    ]
    try:
        done = subprocess.run(args, env=clean_env(), capture_output=True, text=True, timeout=900)
    finally:
        engine.images.remove(tag, noprune=True)
    out = done.stdout + done.stderr
    assert done.returncode in (0, 1), out[-4000:]
    assert f"image {tag} already on the host" in out, out[-4000:]
    (job_script,) = (remote_dir / "jobs").glob("*/job.sh")
    script = job_script.read_text()
    assert (
        "docker run" in script and "--ipc=host" in script and "--network=host" in script and tag in script
    ), script
    (remote_run,) = [p for p in (remote_dir / "runs").iterdir() if p.is_dir()]
    local_run = repo / "runs" / remote_run.name
    manifest = json.loads((local_run / "manifest.json").read_text())
    assert manifest["git"]["commit"] == commit  # the image's CARDTIME_COMMIT: no .git inside
    assert manifest["versions"]["torch"].startswith("2.13.0")
    for stage in stages.split(","):
        assert manifest["stages"][stage]["status"] == "complete", manifest["stages"][stage]
    assert (local_run / "results.parquet").is_file() and (local_run / "verdicts.json").is_file()
    (source,) = (remote_dir / "jobs").glob("*/host-kernel-log.txt.source")
    how = source.read_text().split()[0]
    verdicts = {v["id"]: v for v in json.loads((local_run / "verdicts.json").read_text())["verdicts"]}
    if how in ("dmesg", "sudo-dmesg", "journalctl-k"):  # this machine's log, judged inside the container
        assert f"the host's log ({how}) from boot to " in verdicts["health.kernel_log"]["reason"], verdicts
        assert (local_run / "raw" / "health" / "kernel-log-host.txt").is_file()
    else:
        assert verdicts["health.kernel_log"]["status"] == "skip", (how, verdicts["health.kernel_log"])
