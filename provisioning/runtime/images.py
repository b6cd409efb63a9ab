"""The suite's images on an engine (provisioning/runtime/engine.py): build one from a context, pull, push.

    image = build_image(client, Path("."), tag="cardtime:cuda", buildargs={"CARDTIME_COMMIT": sha},
                        on_line=print)            # the context is tarred here and sent to the engine
    pull_image(client, "registry/name:tag", on_line=print)
    push_image(client, "cardtime:cuda", "registry/name:tag", on_line=print)

Which Dockerfile a CUDA line builds with which arguments is suite/hardware/cuda_lines.py's; the image's
commit is `commit_buildargs`'s.
"""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Callable

import docker.errors
import docker.utils

import docker
from provisioning.runtime.engine import LABEL, EngineError
from suite.gitinfo import IMAGE_COMMIT_ENV, head_commit

LineSink = Callable[[str], None]

CPU_DOCKERFILE = "docker/cpu.Dockerfile"
CUDA_DOCKERFILE = "Dockerfile"
# The CPU image's dependency wheels never travel with the CUDA build (it takes them from PyPI); torch's CPU
# wheel does when docker/prepare-context.sh cuda-cpu put it there (TORCH_BUILD=cpu, CI's CUDA image).
CONTEXT_ONLY_FOR_CPU = ("docker/wheels/deps",)


def commit_buildargs(context: Path, commit: str | None = None) -> dict[str, str]:
    """CARDTIME_COMMIT for the image (the commit the context's files are, 'unknown' outside a checkout): the
    manifest of every run in it records this as the suite's commit."""
    return {IMAGE_COMMIT_ENV: commit or head_commit(context) or "unknown"}


def context_tar(context: Path, dockerfile: str, exclude: tuple[str, ...] = ()) -> io.BytesIO:
    """The build context as the engine receives it: .dockerignore applied, plus `exclude`, plus the
    Dockerfile."""
    ignore = Path(context) / ".dockerignore"
    patterns = []
    if ignore.exists():
        patterns = [
            ln.strip()
            for ln in ignore.read_text().splitlines()
            if ln.strip() and not ln.lstrip().startswith("#")
        ]
    patterns += list(exclude)
    return docker.utils.tar(str(context), exclude=patterns, dockerfile=(dockerfile, None))


def build_image(
    client: docker.DockerClient,
    context: Path,
    *,
    tag: str,
    dockerfile: str = CUDA_DOCKERFILE,
    buildargs: dict[str, str] | None = None,
    network_mode: str | None = None,
    exclude: tuple[str, ...] | None = None,
    on_line: LineSink | None = None,
) -> str:
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
    stream = client.api.build(
        fileobj=tar,
        custom_context=True,
        dockerfile=dockerfile,
        tag=tag,
        rm=True,
        forcerm=True,
        decode=True,
        buildargs=buildargs or {},
        network_mode=network_mode,
        labels={LABEL: "1"},
    )
    for chunk in stream:
        if "error" in chunk:
            tail = "".join(lines[-20:])
            raise EngineError(
                f"building {tag} from {dockerfile} failed: {chunk['error'].strip()}\n"
                f"last lines of the build:\n{tail}fix the step above and run the build again"
            )
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


def split_reference(reference: str) -> tuple[str, str]:
    """registry:5000/name:tag → (registry:5000/name, tag); a reference without tag → latest."""
    match = re.match(r"^(?P<repo>.+?)(?::(?P<tag>[\w][\w.-]{0,127}))?$", reference)
    repo, tag = match.group("repo"), match.group("tag")
    if tag is None or "/" in tag:
        return reference, "latest"
    return repo, tag


def _progress(chunk: dict, on_line: LineSink | None) -> None:
    if on_line and chunk.get("status") and not chunk.get("progressDetail"):
        on_line(f"{chunk.get('id', '')} {chunk['status']}".strip())


def pull_image(client: docker.DockerClient, reference: str, on_line: LineSink | None = None) -> str:
    """Pull `reference` (registry/name:tag) onto the engine; the image id."""
    repo, tag = split_reference(reference)
    hint = (
        "Check the name and that the engine's host can reach the registry (`docker login` there for a "
        "private one)"
    )
    try:
        for chunk in client.api.pull(repo, tag=tag, stream=True, decode=True):
            if "error" in chunk:
                raise EngineError(f"pulling {reference} failed: {chunk['error']}. {hint}")
            _progress(chunk, on_line)
    except docker.errors.APIError as e:
        raise EngineError(f"pulling {reference} failed: {e.explanation or e}. {hint}") from e
    return client.images.get(reference).id


def push_image(
    client: docker.DockerClient, source: str, reference: str, on_line: LineSink | None = None
) -> None:
    """Tag the local image `source` as `reference` (registry/name:tag) and push it."""
    repo, tag = split_reference(reference)
    client.images.get(source).tag(repo, tag=tag)
    for chunk in client.api.push(repo, tag=tag, stream=True, decode=True):
        if "error" in chunk:
            raise EngineError(
                f"pushing {reference} failed: {chunk['error']}. Run `docker login "
                f"{repo.split('/')[0]}` if the registry wants credentials"
            )
        _progress(chunk, on_line)
