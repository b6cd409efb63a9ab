"""A Docker engine through the Docker SDK for Python: local, over docker's own SSH transport, or
through the SSH session of an open fabric.Connection.

    client = connect()                              # DOCKER_HOST, else the default socket
    client = connect("ssh://root@box:2222")         # docker's own SSH transport: user, key, port and
                                                    # proxy from ~/.ssh/config and the agent; the host key
                                                    # must already be in ~/.ssh/known_hosts
    client = connect_over(fabric_connection)        # the SSH session of an open fabric.Connection (its
                                                    # key, port and host-key policy): one login for both

Over SSH the engine runs `docker system dial-stdio` on the far side, so the host needs the
docker CLI. Failures raise EngineError with what to do next.
"""

from __future__ import annotations

import os
from typing import Any, Callable

import docker.errors
from docker.transport import SSHHTTPAdapter

import docker

LABEL = "org.cardtime.suite"
"""Set on every image and container the suite makes, so that they can be found and cleaned up."""


class EngineError(RuntimeError):
    """No engine, or an engine that refused a build, pull, push or run; the message says what to do."""


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
        # shell_out: open no login of its own
        super().__init__(f"ssh://{label}", timeout=int(timeout_s), shell_out=True)
        self.ssh_client = ssh_client
        self._reopen = reopen

    def _connect(self) -> None:  # called when the session's transport has gone: log in again the owner's way
        self._reopen()

    def close(self) -> None:  # the session belongs to its owner
        self.pools.clear()


def connect_over(connection, *, timeout_s: float = 120) -> docker.DockerClient:
    """A client of the engine on the far side of an open (or openable) fabric.Connection.

    The SDK has no public way to borrow a session, so this mounts its own transport adapter and
    sets the two private attributes the SDK reads (`_custom_adapter` for the raw-socket paths of
    logs and attach, `_version` for the API version): both are pinned by the SDK version in
    pyproject.toml and exercised by tests/e2e/test_docker_image.py.
    """
    connection.open()
    label = f"{connection.user}@{connection.host}:{connection.port}"
    # version pinned for construction only: "auto" would make docker dial the host with its own login.
    client = docker.DockerClient(
        base_url=f"ssh://{label}", use_ssh_client=True, version="1.24", timeout=int(timeout_s)
    )
    adapter = _SharedSessionAdapter(connection.client, connection.open, label, timeout_s)
    client.api.mount("http+docker://ssh", adapter)
    client.api._custom_adapter = adapter
    try:
        server = client.api.version(api_version=False)["ApiVersion"]
    except docker.errors.DockerException as e:
        raise EngineError(
            f"no Docker engine reachable through {label}: {e}. Is docker installed there and "
            f"may {connection.user} use it (`docker version` on the host)?"
        ) from e
    # Speak the engine's API version, capped at what this SDK knows (as version="auto" would).
    client.api._version = min(server, docker.constants.DEFAULT_DOCKER_API_VERSION, key=_version_key)
    return client


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))
