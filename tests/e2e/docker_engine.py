"""A Docker engine for the image tests: the running one, else dockerd started here (and stopped after).

dockerd is started the way .ci/run starts it, `--bridge=none --iptables=false`, so it leaves the
host's network alone; builds and containers then use the host's network (`network_mode="host"`).
No image registry is reachable, so the base image is made locally: docker/debian-base.sh
(debootstrap once into a cached tarball, then `docker import`).

The CPU image the tests run (CPU_TEST_IMAGE) is built by build_cpu_test_image, here and in .ci/run before
`make test` (`python -m tests.e2e.docker_engine build-cpu-test-image`): the same Dockerfile, context and build
arguments, so that the first build (Debian's packages and the wheels: minutes on 2 cores) stays out of the
test suite's time and the tests' own build through the SDK finds every layer cached.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOCKET = Path("/var/run/docker.sock")
BASE_IMAGE = "cardtime-base:bookworm"
CPU_TEST_IMAGE = "cardtime:cpu-test"


class EngineUnavailable(RuntimeError):
    """Why no engine could be had; a test skips with this text."""


def _ping() -> bool:
    import docker

    try:
        docker.from_env(timeout=10).ping()
        return True
    except Exception:  # noqa: BLE001 - any failure means "not reachable"
        return False


def start_engine(log_dir: Path) -> subprocess.Popen | None:
    """None when an engine answers already; else the dockerd this starts. Raises EngineUnavailable."""
    if _ping():
        return None
    if shutil.which("dockerd") is None:
        raise EngineUnavailable(
            "no Docker engine answers and dockerd is not installed (apt-get install docker.io; .ci/run does)"
        )
    if os.geteuid() != 0:
        raise EngineUnavailable("no Docker engine answers and starting dockerd needs root")
    log = open(log_dir / "dockerd.log", "w")
    proc = subprocess.Popen(
        ["dockerd", "--bridge=none", "--iptables=false", "--ip6tables=false"],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise EngineUnavailable(
                f"dockerd exited with {proc.returncode}: {(log_dir / 'dockerd.log').read_text()[-1500:]}"
            )
        if SOCKET.exists() and _ping():
            return proc
        time.sleep(0.5)
    proc.terminate()
    raise EngineUnavailable("dockerd did not answer within 60 s: see its log")


def stop_engine(proc: subprocess.Popen | None) -> None:
    if proc is None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def make_base_image() -> None:
    """The local Debian base (debootstrap'd once, cached under /var/cache/cardtime). Raises
    EngineUnavailable."""
    out = subprocess.run(
        [str(ROOT / "docker" / "debian-base.sh"), BASE_IMAGE],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    if out.returncode != 0:
        raise EngineUnavailable(
            f"cannot make the base image {BASE_IMAGE}: {out.stdout[-800:]}{out.stderr[-1500:]}"
        )


def prepare_context() -> None:
    """docker/prepare-context.sh cpu. Where an earlier session left the wheels in the script's cache, pip is
    first pointed at them alone (no index: resolving against the indexes costs ~15 s on a loaded 2-core
    machine); should any be missing there (pip says ERROR), the script runs again with the indexes."""
    cache = Path(os.environ.get("CARDTIME_CACHE", "/var/cache/cardtime")) / "wheels"
    env = {**os.environ, "PY": str(ROOT / ".venv" / "bin" / "python")}
    if (cache / "torch").is_dir() and (cache / "deps").is_dir():
        offline = {**env, "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": f"{cache / 'torch'} {cache / 'deps'}"}
        out = subprocess.run(
            [str(ROOT / "docker" / "prepare-context.sh"), "cpu"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=900,
            env=offline,
        )
        if out.returncode == 0 and "ERROR" not in out.stderr:
            return
    out = subprocess.run(
        [str(ROOT / "docker" / "prepare-context.sh"), "cpu"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
    )
    if out.returncode != 0:
        raise RuntimeError(f"docker/prepare-context.sh cpu failed:\n{out.stdout[-1500:]}{out.stderr[-1500:]}")


def build_cpu_test_image(client, on_line=None) -> str:
    """CPU_TEST_IMAGE from this tree (docker/cpu.Dockerfile on the local base, the build arguments `make
    rehearse-docker` passes: the tree's own commit): its image id. Raises EngineUnavailable without a base."""
    from provisioning.runtime import images
    from provisioning.runtime.container_cli import image_buildargs

    make_base_image()
    prepare_context()
    return images.build_image(
        client,
        ROOT,
        tag=CPU_TEST_IMAGE,
        dockerfile=images.CPU_DOCKERFILE,
        buildargs=image_buildargs(ROOT, base=BASE_IMAGE),
        network_mode="host",
        on_line=on_line,
    )


def main(argv: list[str]) -> int:
    """`build-cpu-test-image`: what .ci/run calls before `make test` (its output is the build's)."""
    if argv != ["build-cpu-test-image"]:
        print("usage: python -m tests.e2e.docker_engine build-cpu-test-image", file=sys.stderr)
        return 2
    from provisioning.runtime.engine import connect

    started = time.monotonic()
    try:
        image = build_cpu_test_image(connect(), on_line=print)
    except EngineUnavailable as e:
        print(f"the CPU test image was not built: {e}", file=sys.stderr)
        return 1
    print(f"built {CPU_TEST_IMAGE} ({image[:19]}) in {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
