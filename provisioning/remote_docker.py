"""RUNTIME=docker on the host: the image (IMAGE= pulled, else built on the host's engine from the
local HEAD), and the `docker run` command line the detached job runs.

The engine is driven through provisioning.container over the SSH session already open (one
login, the same host-key policy). The build context is `git archive HEAD`, so the image holds
exactly the commit the host runs, never uncommitted files. The container runs in the foreground
of the detached job (provisioning/jobs.py), so pid, log, exit code and re-attach work exactly as
with RUNTIME=host; its flags are container.start_suite's (GPUs, host network and IPC, ulimits),
and the run and job folders are mounted at the same paths inside as outside, so every path the
suite records (LAST, the manifest) is valid on the host too.
"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

from .codesync import LocalCheckout
from .connection import Remote


def image_tag(commit: str) -> str:
    return f"cardtime:{commit[:12]}"


def export_head(local: LocalCheckout, dest: Path) -> None:
    """The files of HEAD, and nothing else, into `dest` (the build context)."""
    archive = subprocess.run(["git", "-C", str(local.root), "archive", "--format=tar", local.commit],
                             capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)


def ensure_image(remote: Remote, local: LocalCheckout, image: str | None, say=print) -> str:
    """The image to run: IMAGE= pulled, or cardtime:<commit> built on the host's engine (reused when there)."""
    import docker.errors

    from . import container

    client = container.connect_over(remote.conn)
    if image:
        say(f"pulling {image}: the run uses the code inside this image, not the shipped HEAD")
        try:
            container.pull_image(client, image, on_line=say)
        except container.EngineError as e:
            try:
                client.images.get(image)  # a host without registry access may hold the image already
            except docker.errors.ImageNotFound:
                raise e from None
            say(f"pull failed ({str(e).splitlines()[0]}); using the copy of {image} already on the host")
        return image
    tag = image_tag(local.commit)
    try:
        client.images.get(tag)
        say(f"image {tag} already on the host")
        return tag
    except docker.errors.ImageNotFound:
        pass
    say(f"building {tag} on the host's engine from HEAD (first build: tens of minutes)")
    with tempfile.TemporaryDirectory() as tmp:
        export_head(local, Path(tmp))
        container.build_image(client, Path(tmp), tag=tag, buildargs={"CARDTIME_COMMIT": local.commit}, on_line=say)
    return tag


def run_argv(image: str, *, job_id: str, job_dir: str, runs_dir: str, suite_args: list[str], gpus: bool) -> list[str]:
    """`docker run` of the suite with container.start_suite's settings, in the foreground of the job."""
    argv = ["docker", "run", "--rm", "--name", f"cardtime-{job_id}", "--network", "host", "--ipc", "host",
            "--ulimit", "stack=67108864",
            "-v", f"{runs_dir}:{runs_dir}", "-v", f"{job_dir}:{job_dir}",
            # CARDTIME_COMMIT is the image's own (a build argument): with IMAGE= the code is the image's, not HEAD's.
            "-e", "PYTHONUNBUFFERED=1"]
    if gpus:
        # NCCL pins host memory (and RDMA buffers); a CPU run pins nothing (container.suite_ulimits).
        argv += ["--ulimit", "memlock=-1", "--gpus", "all"]
    return argv + [image, *suite_args]
