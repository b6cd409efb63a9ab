"""Docker engines through the Docker SDK for Python: build an image, run the suite in it, follow it.

    python -m provisioning.container build [--dockerfile docker/cpu.Dockerfile] [--tag cardtime:cpu]
    python -m provisioning.container rehearse [--stages topology,bandwidth]   # make rehearse-docker
    python -m provisioning.container push registry/name:tag                   # make image-push

The engine is local (DOCKER_HOST, else the default socket) or remote, reached over SSH:

    client = connect()                              # local engine
    client = connect("ssh://root@box:2222")         # docker's own SSH transport: user, key, port and
                                                    # proxy from ~/.ssh/config and the agent; the host key
                                                    # must already be in ~/.ssh/known_hosts
    client = connect_over(fabric_connection)        # the SSH session of an open fabric.Connection (its
                                                    # key, port and host-key policy): one login for both

Either way the engine runs `docker system dial-stdio` on the far side, so the host needs the
docker CLI. Then, for any client:

    image = build_image(client, Path("."), tag="cardtime:cuda", buildargs={"CARDTIME_COMMIT": sha},
                        on_line=print)                    # the context is tarred here and sent to the engine
    pull_image(client, "registry/name:tag", on_line=print)
    run = start_suite(client, image, runs_dir="/srv/cardtime/runs",
                      args=["run", "--profile", "nccl-gpu", "--out", "/srv/cardtime/runs"],
                      gpus=True, name="cardtime-<job>")   # detached; returns at once
    for line in follow(run): ...                          # log lines until the container ends
    code = wait(run)                                      # its exit status
    run = find_suite(client, "cardtime-<job>")            # re-attach after a dropped connection

`start_suite` gives the container what the suite needs on a GPU box, the `docker run` flags
documented in the README: `--gpus all --ipc=host --network=host --ulimit memlock=-1
--ulimit stack=67108864` and the run folder as a volume, mounted at the same path inside as
outside so every path the suite records is valid on the host too. Without GPUs it leaves out
`--gpus` and `memlock` (a CPU run pins no memory; see suite_ulimits).

Failures raise EngineError (no engine, a failed build or pull) with what to do next.
"""

from __future__ import annotations

import argparse
import io
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, Iterator

import docker
import docker.errors
import docker.utils
from docker.transport import SSHHTTPAdapter
from docker.types import DeviceRequest, Ulimit

LineSink = Callable[[str], None]

CPU_DOCKERFILE = "docker/cpu.Dockerfile"
CUDA_DOCKERFILE = "Dockerfile"
CONTEXT_ONLY_FOR_CPU = ("docker/wheels",)  # the CPU image's wheels (~300 MB) never travel with the CUDA build
LABEL = "org.cardtime.suite"

# NCCL pins (page-locks) its buffers and runs proxy threads that need deep stacks; host IPC gives
# its shared-memory transport all of /dev/shm; host networking exposes the RDMA/IB interfaces.
MEMLOCK_UNLIMITED = Ulimit(name="memlock", soft=-1, hard=-1)
STACK_64_MIB = Ulimit(name="stack", soft=64 * 1024 * 1024, hard=64 * 1024 * 1024)  # 67108864 bytes
RUN_FLAGS = ("--gpus", "all", "--ipc=host", "--network=host", "--ulimit", "memlock=-1",
             "--ulimit", "stack=67108864")
"""The same settings as `docker run` flags, for people who start the image by hand."""


class EngineError(RuntimeError):
    """No engine, or an engine that refused a build, pull, push or run; the message says what to do."""


# ---------------------------------------------------------------- engines


def connect(url: str | None = None, *, timeout_s: float = 120) -> docker.DockerClient:
    """A client of the engine at url (unix://, tcp://, ssh://user@host[:port], or user@host[:port])."""
    try:
        if url is None:
            client = docker.from_env(timeout=int(timeout_s))
        else:
            if "://" not in url:
                url = f"ssh://{url}"
            client = docker.DockerClient(base_url=url, timeout=int(timeout_s), version="auto")
        client.ping()
    except docker.errors.DockerException as e:
        where = url or os.environ.get("DOCKER_HOST") or "the local socket"
        raise EngineError(
            f"no Docker engine at {where}: {e}. Start one (dockerd, or `systemctl start docker`), or set "
            "DOCKER_HOST; over SSH, `ssh HOST docker version` must work without a password prompt"
        ) from e
    return client


class _SharedSessionAdapter(SSHHTTPAdapter):
    """docker's SSH transport over an SSH session someone else opened and authenticated.

    Each HTTP connection to the engine is one `docker system dial-stdio` channel of that session,
    exactly as docker's own paramiko transport makes them; only the login is borrowed.
    """

    def __init__(self, ssh_client, reopen: Callable[[], Any], label: str, timeout_s: float):
        super().__init__(f"ssh://{label}", timeout=int(timeout_s), shell_out=True)  # shell_out: open no login of its own
        self.ssh_client = ssh_client
        self._reopen = reopen

    def _connect(self) -> None:  # called when the session's transport has gone: log in again the owner's way
        self._reopen()

    def close(self) -> None:  # the session belongs to its owner
        self.pools.clear()


def connect_over(connection, *, timeout_s: float = 120) -> docker.DockerClient:
    """A client of the engine on the far side of an open (or openable) fabric.Connection."""
    connection.open()
    label = f"{connection.user}@{connection.host}:{connection.port}"
    # version pinned for construction only: "auto" would make docker dial the host with its own login.
    client = docker.DockerClient(base_url=f"ssh://{label}", use_ssh_client=True, version="1.24",
                                 timeout=int(timeout_s))
    adapter = _SharedSessionAdapter(connection.client, connection.open, label, timeout_s)
    client.api.mount("http+docker://ssh", adapter)
    client.api._custom_adapter = adapter  # the raw-socket paths (logs, attach) look the adapter up here
    try:
        server = client.api.version(api_version=False)["ApiVersion"]
    except docker.errors.DockerException as e:
        raise EngineError(f"no Docker engine reachable through {label}: {e}. Is docker installed there and "
                          f"may {connection.user} use it (`docker version` on the host)?") from e
    # Speak the engine's API version, capped at what this SDK knows (as version="auto" would).
    client.api._version = min(server, docker.constants.DEFAULT_DOCKER_API_VERSION, key=_version_key)
    return client


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def has_gpu_runtime(client: docker.DockerClient) -> bool:
    """Whether the engine can hand GPUs to containers: an `nvidia` runtime, or CDI devices of nvidia.com."""
    info = client.info()
    if "nvidia" in (info.get("Runtimes") or {}):
        return True
    return any(str(d.get("ID", "")).startswith("nvidia.com/gpu") for d in info.get("DiscoveredDevices") or [])


# ---------------------------------------------------------------- images


def context_tar(context: Path, dockerfile: str, exclude: tuple[str, ...] = ()) -> io.BytesIO:
    """The build context as the engine receives it: .dockerignore applied, plus `exclude`, plus the Dockerfile."""
    ignore = Path(context) / ".dockerignore"
    patterns = []
    if ignore.exists():
        patterns = [ln.strip() for ln in ignore.read_text().splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    patterns += list(exclude)
    return docker.utils.tar(str(context), exclude=patterns, dockerfile=(dockerfile, None))


def build_image(client: docker.DockerClient, context: Path, *, tag: str, dockerfile: str = CUDA_DOCKERFILE,
                buildargs: dict[str, str] | None = None, network_mode: str | None = None,
                exclude: tuple[str, ...] | None = None, on_line: LineSink | None = None) -> str:
    """Build `dockerfile` of `context` as `tag` on the engine, streaming the build's output; the image id.

    network_mode "host" lets the build's package installs use the host's network (an engine
    started with --bridge=none has no other). `exclude` defaults to the CPU image's wheels for
    every Dockerfile but the CPU one.
    """
    if exclude is None:
        exclude = () if dockerfile == CPU_DOCKERFILE else CONTEXT_ONLY_FOR_CPU
    tar = context_tar(context, dockerfile, exclude)
    lines: list[str] = []
    image_id = None
    stream = client.api.build(fileobj=tar, custom_context=True, dockerfile=dockerfile, tag=tag, rm=True,
                              forcerm=True, decode=True, buildargs=buildargs or {}, network_mode=network_mode,
                              labels={LABEL: "1"})
    for chunk in stream:
        if "error" in chunk:
            tail = "".join(lines[-20:])
            raise EngineError(f"building {tag} from {dockerfile} failed: {chunk['error'].strip()}\n"
                              f"last lines of the build:\n{tail}fix the step above and run the build again")
        text = chunk.get("stream")
        if text:
            lines.append(text)
            if on_line:
                for line in text.splitlines():
                    if line.strip():
                        on_line(line)
        aux = chunk.get("aux") or {}
        if "ID" in aux:
            image_id = aux["ID"]
    if image_id is None:
        image_id = client.images.get(tag).id
    return image_id


def _split_reference(reference: str) -> tuple[str, str]:
    """registry:5000/name:tag → (registry:5000/name, tag); a reference without tag → latest."""
    match = re.match(r"^(?P<repo>.+?)(?::(?P<tag>[\w][\w.-]{0,127}))?$", reference)
    repo, tag = match.group("repo"), match.group("tag")
    if tag is None or "/" in tag:
        return reference, "latest"
    return repo, tag


def pull_image(client: docker.DockerClient, reference: str, on_line: LineSink | None = None) -> str:
    """Pull `reference` (registry/name:tag) onto the engine; the image id."""
    repo, tag = _split_reference(reference)
    try:
        for chunk in client.api.pull(repo, tag=tag, stream=True, decode=True):
            if "error" in chunk:
                raise EngineError(f"pulling {reference} failed: {chunk['error']}. Check the name and that the "
                                  "engine's host can reach the registry (`docker login` there for a private one)")
            if on_line and chunk.get("status") and not chunk.get("progressDetail"):
                on_line(f"{chunk.get('id', '')} {chunk['status']}".strip())
    except docker.errors.APIError as e:
        raise EngineError(f"pulling {reference} failed: {e.explanation or e}. Check the name and that the engine's "
                          "host can reach the registry (`docker login` there for a private one)") from e
    return client.images.get(reference).id


def push_image(client: docker.DockerClient, source: str, reference: str, on_line: LineSink | None = None) -> None:
    """Tag the local image `source` as `reference` (registry/name:tag) and push it."""
    repo, tag = _split_reference(reference)
    client.images.get(source).tag(repo, tag=tag)
    for chunk in client.api.push(repo, tag=tag, stream=True, decode=True):
        if "error" in chunk:
            raise EngineError(f"pushing {reference} failed: {chunk['error']}. Run `docker login "
                              f"{repo.split('/')[0]}` if the registry wants credentials")
        if on_line and chunk.get("status") and not chunk.get("progressDetail"):
            on_line(f"{chunk.get('id', '')} {chunk['status']}".strip())


# ---------------------------------------------------------------- the suite's container


def gpu_requests(gpus: bool) -> list[DeviceRequest]:
    """`--gpus all` as the API spells it: every GPU, with the compute and utility capabilities."""
    return [DeviceRequest(count=-1, capabilities=[["gpu"]])] if gpus else []


def suite_ulimits(gpus: bool) -> list[Ulimit]:
    """64 MiB stacks always; unlimited locked memory with GPUs only (NCCL's pinned and RDMA buffers).

    A CPU run pins nothing, and an engine whose own limit on locked memory is finite (dockerd
    started without LimitMEMLOCK=infinity, or inside a container without CAP_SYS_RESOURCE)
    refuses to start a container that asks for more.
    """
    return [STACK_64_MIB, MEMLOCK_UNLIMITED] if gpus else [STACK_64_MIB]


def allows_unlimited_memlock(client: docker.DockerClient, image: str) -> bool:
    """Whether the engine can start a container with `--ulimit memlock=-1`, as NCCL on GPUs wants.

    False where dockerd's own limit is finite and it may not raise it (no LimitMEMLOCK=infinity
    in docker.service; or dockerd itself inside a container without CAP_SYS_RESOURCE).
    """
    probe = client.containers.create(image, command=["true"], ulimits=[MEMLOCK_UNLIMITED], network_mode="host",
                                     labels={LABEL: "1"})
    try:
        probe.start()
        probe.wait()
        return True
    except docker.errors.APIError as e:
        if "rlimit" in str(e.explanation or e):
            return False
        raise
    finally:
        probe.remove(force=True)


def create_suite(client: docker.DockerClient, image: str, *, runs_dir: str, args: list[str], gpus: bool,
                 name: str | None = None, environment: dict[str, str] | None = None,
                 user: str | None = None, network_mode: str = "host"):
    """Create (not start) the suite's container; `runs_dir` (a folder on the engine's host) is mounted at the same path."""
    env = {"PYTHONUNBUFFERED": "1", **(environment or {})}
    try:
        return client.containers.create(
            image, command=list(args), name=name, labels={LABEL: "1"},
            network_mode=network_mode, ipc_mode="host", ulimits=suite_ulimits(gpus),
            volumes={runs_dir: {"bind": runs_dir, "mode": "rw"}}, device_requests=gpu_requests(gpus),
            environment=env, user=user,
        )
    except docker.errors.ImageNotFound as e:
        raise EngineError(f"no image {image} on the engine: build it (make image) or pull it (IMAGE=)") from e


def start_suite(client: docker.DockerClient, image: str, *, runs_dir: str, args: list[str], gpus: bool,
                name: str | None = None, environment: dict[str, str] | None = None,
                user: str | None = None, network_mode: str = "host"):
    """Start the suite's container detached and return it; the settings are create_suite's.

    The container is kept after it ends (no auto-remove) so that its exit status and log can be
    read after a dropped connection; `remove_suite` deletes it. One that cannot start is removed.
    """
    container = create_suite(client, image, runs_dir=runs_dir, args=args, gpus=gpus, name=name,
                             environment=environment, user=user, network_mode=network_mode)
    try:
        container.start()
    except docker.errors.APIError as e:
        container.remove(force=True)
        text = str(e.explanation or e)
        if "rlimit" in text and gpus:
            hint = ("the engine's host caps locked memory: set LimitMEMLOCK=infinity for docker.service "
                    "(systemctl edit docker) and restart docker")
        elif gpus and ("gpu" in text.lower() or "device driver" in text):
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


# ---------------------------------------------------------------- command line (the Makefile's targets)


def git_commit(repo: Path) -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True, timeout=10)
        return out.stdout.strip() or "unknown"
    except OSError:
        return "unknown"


def _say(line: str) -> None:
    print(line, flush=True)


def cmd_build(args) -> int:
    client = connect(args.engine)
    buildargs = {"CARDTIME_COMMIT": git_commit(args.context)}
    if args.base:
        buildargs["BASE"] = args.base
    for item in args.build_arg:
        key, _, value = item.partition("=")
        buildargs[key] = value
    image = build_image(client, args.context, tag=args.tag, dockerfile=args.dockerfile, buildargs=buildargs,
                        network_mode=args.network, on_line=_say if args.verbose else None)
    print(f"built {args.tag} ({image[:19]})")
    return 0


def cmd_push(args) -> int:
    client = connect(args.engine)
    push_image(client, args.source, args.reference, on_line=_say)
    print(f"pushed {args.reference}")
    return 0


def cmd_rehearse(args) -> int:
    """Build the CPU image, run the rehearsal in it with runs/ mounted, and leave runs/LAST pointing at the run."""
    client = connect(args.engine)
    if not args.no_build:
        buildargs = {"CARDTIME_COMMIT": git_commit(args.context)}
        if args.base:
            buildargs["BASE"] = args.base
        build_image(client, args.context, tag=args.tag, dockerfile=CPU_DOCKERFILE, buildargs=buildargs,
                    network_mode="host", on_line=_say if args.verbose else None)
    runs = args.runs.resolve()
    runs.mkdir(parents=True, exist_ok=True)
    suite_args = ["run", "--profile", "gloo-cpu", "--out", str(runs), "--record-last", str(runs / "LAST")]
    if args.stages:
        suite_args += ["--stages", args.stages]
    # The host's own user, so the run directory on the laptop is not root's.
    user = f"{os.getuid()}:{os.getgid()}" if os.getuid() != 0 else None
    run = start_suite(client, args.tag, runs_dir=str(runs), args=suite_args, gpus=False, user=user,
                      environment={"HOME": "/tmp", "MPLCONFIGDIR": "/tmp/matplotlib"})
    try:
        for line in follow(run):
            print(line, flush=True)
        code = wait(run)
    finally:
        remove_suite(run)
    print(f"container exited with {code}; run directory: {(runs / 'LAST').read_text().strip() if (runs / 'LAST').exists() else '(none)'}")
    return code


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m provisioning.container", description=__doc__.split("\n")[0])
    p.add_argument("--engine", help="engine URL (default: DOCKER_HOST or the local socket)")
    sub = p.add_subparsers(dest="command", required=True)

    b = sub.add_parser("build", help="build an image through the engine")
    b.add_argument("--dockerfile", default=CUDA_DOCKERFILE)
    b.add_argument("--tag", default="cardtime:cuda")
    b.add_argument("--context", type=Path, default=Path("."))
    b.add_argument("--base", help="BASE build argument (the FROM image)")
    b.add_argument("--build-arg", action="append", default=[], metavar="KEY=VALUE")
    b.add_argument("--network", help="network mode of the build's RUN steps (host on an engine without a bridge)")
    b.add_argument("--verbose", action="store_true", help="stream the build's output")
    b.set_defaults(func=cmd_build)

    q = sub.add_parser("push", help="tag a local image as REFERENCE and push it")
    q.add_argument("reference", help="registry/name:tag")
    q.add_argument("--source", default="cardtime:cuda")
    q.set_defaults(func=cmd_push)

    r = sub.add_parser("rehearse", help="the rehearsal inside the CPU image, runs/ mounted")
    r.add_argument("--tag", default="cardtime:cpu")
    r.add_argument("--context", type=Path, default=Path("."))
    r.add_argument("--base", help="BASE build argument (default: the Dockerfile's, debian:bookworm-slim)")
    r.add_argument("--runs", type=Path, default=Path("runs"))
    r.add_argument("--stages", help="only these stages, e.g. topology,bandwidth")
    r.add_argument("--no-build", action="store_true", help="run the image as it is")
    r.add_argument("--verbose", action="store_true", help="stream the build's output")
    r.set_defaults(func=cmd_rehearse)

    args = p.parse_args(argv)
    try:
        return args.func(args)
    except EngineError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
