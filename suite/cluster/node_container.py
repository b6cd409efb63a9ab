"""A containerised multi-node run (`make remote HOSTS=… RUNTIME=docker`): another node's command in the same
image.

The suite runs inside the image on the first node; every other node has only Docker and the image (carried or
pulled there before the run, its ID checked equal: provisioning/cluster/image.py). So what ssh starts on
another node is not a process of the host but `docker run` of the same image in the foreground, with the
single-host container's settings (host network and IPC, every GPU, the ulimits, the run and job folders
mounted at the same paths). Those settings are provisioning's (suite_container.RunSettings); the job hands
them down as the argv of `docker run … IMAGE` in CARDTIME_NODE_CONTAINER (JSON), and this module only adds
what differs per launch: the container's name, the working folder and the environment, then the command.

The docker CLI stays in the foreground of the ssh session, so a hang-up (the suite killing its ssh) reaches
it, and it forwards the signal to the container's torchrun (its signal proxy); `--rm` removes the container
after.
"""

from __future__ import annotations

import json
import re
import shlex
from typing import Mapping, Sequence

NODE_CONTAINER_ENV = "CARDTIME_NODE_CONTAINER"
"""The JSON argv `docker run [flags…] IMAGE` a containerised run's other nodes run their commands with."""


def container_prefix(env: Mapping[str, str]) -> list[str] | None:
    """The other nodes' `docker run … IMAGE` argv, or None in a run that is not containerised."""
    text = env.get(NODE_CONTAINER_ENV, "")
    if not text:
        return None
    argv = json.loads(text)
    if not (
        isinstance(argv, list)
        and len(argv) >= 3
        and argv[:2] == ["docker", "run"]
        and all(isinstance(a, str) for a in argv)
    ):
        raise ValueError(f"{NODE_CONTAINER_ENV} is not the JSON argv of `docker run … IMAGE`: {text[:200]}")
    return argv


def container_name(*parts: str) -> str:
    """A container name Docker accepts ([A-Za-z0-9][A-Za-z0-9_.-]*) made of `parts`."""
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", "-".join(p for p in parts if p)).strip("-.")
    return name or "cardtime-node"


def container_node_command(
    prefix: Sequence[str], name: str, cwd: str, env: Mapping[str, str], argv: Sequence[str]
) -> str:
    """What ssh runs on another node of a containerised run: `docker run` of the same image (prefix's last
    word) with prefix's settings, named `name`, in `cwd`, the environment set, running `argv`; exec'd, so the
    docker CLI is the ssh session's process and a hang-up reaches it."""
    *flags, image = prefix
    words = [*flags, "--name", name, "-w", cwd]
    for key, value in sorted(env.items()):
        words += ["-e", f"{key}={value}"]
    return "exec " + shlex.join([*words, image, *argv])
