"""The suite's container: its run settings, spelled once, and its life on an engine.

`RunSettings` is what the suite needs from a container on a GPU box, the `docker run` flags the
README documents: `--gpus all --ipc=host --network=host --ulimit memlock=-1 --ulimit
stack=67108864`, the run folder mounted at the same path inside as outside (so every path the
suite records is valid on the host too), and the host user's uid where that is not root (so the
run folders it leaves are the user's). The same settings become the Docker SDK's arguments
(`sdk_create_kwargs`, for `start_suite`) and a `docker run` command line (`docker_run_argv`,
for the detached job of RUNTIME=docker), so the two cannot drift apart. Without GPUs they leave
out `--gpus` and memlock: a CPU run pins no memory, and an engine whose own limit on locked
memory is finite (dockerd without LimitMEMLOCK=infinity, or inside a container without
CAP_SYS_RESOURCE) refuses a container that asks for more.

    run = start_suite(client, image, RunSettings(gpus=True, mounts=("/srv/cardtime/runs",)),
                      args=["run", "--profile", "nccl-gpu", "--out", "/srv/cardtime/runs"],
                      name="cardtime-<job>")      # detached; returns at once
    for line in follow(run): ...                  # log lines until the container ends
    code = wait(run)                              # its exit status
    run = find_suite(client, "cardtime-<job>")    # re-attach after a dropped connection
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator

import docker.errors
from docker.types import DeviceRequest, Ulimit

import docker
from provisioning.runtime.engine import LABEL, EngineError

# NCCL pins (page-locks) its buffers and runs proxy threads that need deep stacks; host IPC gives
# its shared-memory transport all of /dev/shm; host networking exposes the RDMA/IB interfaces.
STACK_BYTES = 64 * 1024 * 1024  # 67108864
UNLIMITED = -1
RDMA_DEVICES = "/dev/infiniband"  # uverbs*, rdma_cm: what libibverbs opens
RDMA_DOCKER_FLAGS = [f"--device={RDMA_DEVICES}", "--cap-add=IPC_LOCK"]
NON_ROOT_ENV = {"HOME": "/tmp", "MPLCONFIGDIR": "/tmp/matplotlib"}
"""A uid the image does not know has no home: matplotlib's and pip's caches go to /tmp."""
LOGIN_FILES = ("/etc/passwd", "/etc/group")
"""The host's account files, mounted read-only over the image's for a login mapped into it
(RunSettings.login_home): ssh in the image refuses a uid without a passwd entry ("No user exists for uid …")
and finds ~/.ssh by it."""


@dataclass(frozen=True)
class RunSettings:
    gpus: bool
    mounts: tuple[str, ...] = ()
    """Folders on the engine's host, each mounted read-write at the same path inside (no ':' in them)."""
    environment: dict[str, str] = field(default_factory=dict)
    user: str | None = None
    """'uid:gid' to run as; None: the image's user (root)."""
    login_home: str = ""
    """With `user`: the host login's home, its account known inside (LOGIN_FILES) and HOME set to it, so ssh
    in the image (a multi-node run's suite reaching the other nodes) runs as that user with its ~/.ssh
    (mounted by the caller); its caches still go to /tmp (the home inside is only the mount's parent)."""
    host_folders: tuple[str, ...] = ()
    """Host folders mounted read-only at the same paths: the EFA software's libfabric and NCCL net plugin
    (provisioning/runtime/efa.py)."""
    rdma: bool = False
    """The host has /dev/infiniband: its devices passed in, with IPC_LOCK (NCCL's IB transport registers
    memory with the NIC, which needs locked pages; memlock is already unlimited with GPUs). Without them NCCL
    silently falls back to sockets across nodes."""

    def ulimits(self) -> list[tuple[str, int]]:
        """(name, soft = hard limit): 64 MiB stacks always, unlimited locked memory with GPUs only."""
        return [("memlock", UNLIMITED), ("stack", STACK_BYTES)] if self.gpus else [("stack", STACK_BYTES)]

    def env(self) -> dict[str, str]:
        login = (
            {"HOME": self.login_home, "XDG_CACHE_HOME": "/tmp/.cache"}
            if self.user and self.login_home
            else {}
        )
        return {"PYTHONUNBUFFERED": "1", **(NON_ROOT_ENV if self.user else {}), **login, **self.environment}

    def login_files(self) -> tuple[str, ...]:
        return LOGIN_FILES if self.user and self.login_home else ()

    def docker_flags(self) -> list[str]:
        """The settings as `docker run` flags, in the order the README shows them."""
        flags = ["--gpus", "all"] if self.gpus else []
        flags += ["--ipc=host", "--network=host"]
        for name, limit in self.ulimits():
            flags += ["--ulimit", f"{name}={limit}"]
        if self.rdma:
            flags += RDMA_DOCKER_FLAGS
        if self.user:
            flags += ["--user", self.user]
        for path in self.mounts:
            flags += ["-v", f"{path}:{path}:rw"]  # as the engine records the SDK's volumes
        for path in (*self.login_files(), *self.host_folders):
            flags += ["-v", f"{path}:{path}:ro"]
        for key, value in self.env().items():
            flags += ["-e", f"{key}={value}"]
        return flags

    def sdk_create_kwargs(self) -> dict:
        """The settings as the Docker SDK's `containers.create` arguments."""
        return {
            "network_mode": "host",
            "ipc_mode": "host",
            "ulimits": [Ulimit(name=name, soft=limit, hard=limit) for name, limit in self.ulimits()],
            # `--gpus all` as the API spells it: every GPU, with the compute and utility capabilities.
            "device_requests": [DeviceRequest(count=-1, capabilities=[["gpu"]])] if self.gpus else [],
            "volumes": {
                **{path: {"bind": path, "mode": "rw"} for path in self.mounts},
                **{path: {"bind": path, "mode": "ro"} for path in (*self.login_files(), *self.host_folders)},
            },
            "environment": self.env(),
            "user": self.user,
            **(
                {"devices": [f"{RDMA_DEVICES}:{RDMA_DEVICES}:rwm"], "cap_add": ["IPC_LOCK"]}
                if self.rdma
                else {}
            ),
        }


def host_user(uid: int | None, gid: int | None) -> str | None:
    """'uid:gid' for a non-root user (the container leaves files the user owns); None for root or unknown."""
    if uid is None or gid is None or uid == 0:
        return None
    return f"{uid}:{gid}"


def docker_run_argv(image: str, settings: RunSettings, args: list[str], *, name: str) -> list[str]:
    """`docker run` of the suite in the foreground (the detached job's command), removed when it ends."""
    return ["docker", "run", "--rm", "--name", name, *settings.docker_flags(), image, *args]


def create_suite(
    client: docker.DockerClient,
    image: str,
    settings: RunSettings,
    *,
    args: list[str],
    name: str | None = None,
):
    """Create (not start) the suite's container."""
    try:
        return client.containers.create(
            image, command=list(args), name=name, labels={LABEL: "1"}, **settings.sdk_create_kwargs()
        )
    except docker.errors.ImageNotFound as e:
        raise EngineError(f"no image {image} on the engine: build it (make image) or pull it (IMAGE=)") from e


def start_suite(
    client: docker.DockerClient,
    image: str,
    settings: RunSettings,
    *,
    args: list[str],
    name: str | None = None,
):
    """Start the suite's container detached and return it.

    The container is kept after it ends (no auto-remove) so that its exit status and log can be
    read after a dropped connection; `remove_suite` deletes it. One that cannot start is removed.
    """
    container = create_suite(client, image, settings, args=args, name=name)
    try:
        container.start()
    except docker.errors.APIError as e:
        container.remove(force=True)
        text = str(e.explanation or e)
        if "rlimit" in text and settings.gpus:
            hint = (
                "the engine's host caps locked memory: set LimitMEMLOCK=infinity for docker.service "
                "(systemctl edit docker) and restart docker"
            )
        elif settings.gpus and ("gpu" in text.lower() or "device driver" in text):
            hint = "install nvidia-container-toolkit on the host and restart docker, or run without GPUs"
        else:
            hint = "read the engine's message"
        raise EngineError(f"starting {image} failed: {text}: {hint}") from e
    return container


def follow(container, since: int | None = None) -> Iterator[str]:
    """The container's log, line by line, until it ends (from its start, or from unix time `since`)."""
    pending = b""
    for chunk in container.logs(stream=True, follow=True, since=since):
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            yield line.decode("utf-8", "replace").rstrip("\r")
    if pending:
        yield pending.decode("utf-8", "replace")


def wait(container, timeout_s: float | None = None) -> int:
    """The container's exit status, once it has ended."""
    return int(container.wait(timeout=timeout_s)["StatusCode"])


def find_suite(client: docker.DockerClient, name: str):
    """The suite's container called `name`, running or ended, or None."""
    try:
        return client.containers.get(name)
    except docker.errors.NotFound:
        return None


def remove_suite(container) -> None:
    container.remove(force=True)
