"""RUNTIME=docker on the host: the image (IMAGE= pulled, else built on the host's engine from the
local HEAD, on the CUDA line preflight chose), and the `docker run` command line the detached job runs.

The engine is driven through provisioning/engine.py over the SSH session already open (one
login, the same host-key policy). The build context is `git archive HEAD`, so the image holds
exactly the commit the host runs, never uncommitted files. The container runs in the foreground
of the detached job (provisioning/jobs.py), so pid, log, exit code and re-attach work exactly as
with RUNTIME=host; its settings are suite_container.RunSettings' (GPUs, host network and IPC,
ulimits, the host user's uid), and the run and job folders are mounted at the same paths inside
as outside, so every path the suite records (LAST, the manifest) is valid on the host too.
"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

from suite.cuda_lines import DEFAULT, CudaLine

from . import images, suite_container
from .codesync import LocalCheckout
from .connection import Remote
from .engine import EngineError, connect_over


def image_tag(commit: str, line: CudaLine | None = None) -> str:
    """cardtime:<commit[:12]>, with the CUDA line when it is not the Dockerfile's default."""
    suffix = f"-{line.name}" if line is not None and line != DEFAULT else ""
    return f"cardtime:{commit[:12]}{suffix}"


def export_head(local: LocalCheckout, dest: Path) -> None:
    """The files of HEAD, and nothing else, into `dest` (the build context)."""
    archive = subprocess.run(["git", "-C", str(local.root), "archive", "--format=tar", local.commit],
                             capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)


def ensure_image(remote: Remote, local: LocalCheckout, image: str | None, say=print,
                 line: CudaLine | None = None) -> str:
    """The image to run: IMAGE= pulled, or cardtime:<commit> of `line` built on the host's engine (reused when there)."""
    import docker.errors

    client = connect_over(remote.conn)
    if image:
        say(f"pulling {image}: the run uses the code inside this image, not the shipped HEAD")
        try:
            images.pull_image(client, image, on_line=say)
        except EngineError as e:
            try:
                client.images.get(image)  # a host without registry access may hold the image already
            except docker.errors.ImageNotFound:
                raise e from None
            say(f"pull failed ({str(e).splitlines()[0]}); using the copy of {image} already on the host")
        return image
    tag = image_tag(local.commit, line)
    try:
        client.images.get(tag)
        say(f"image {tag} already on the host")
        return tag
    except docker.errors.ImageNotFound:
        pass
    say(f"building {tag} on the host's engine from HEAD{f' (CUDA {line.cuda})' if line else ''} "
        "(first build: tens of minutes)")
    buildargs = images.commit_buildargs(local.root, local.commit)
    if line is not None:
        buildargs.update(line.build_args())
    with tempfile.TemporaryDirectory() as tmp:
        export_head(local, Path(tmp))
        images.build_image(client, Path(tmp), tag=tag, buildargs=buildargs, on_line=say)
    return tag


def run_argv(image: str, *, job_id: str, job_dir: str, runs_dir: str, suite_args: list[str], gpus: bool,
             user: str | None = None) -> list[str]:
    """`docker run` of the suite in the foreground of the job, with suite_container's settings.

    CARDTIME_COMMIT is the image's own (a build argument): with IMAGE= the code is the image's, not HEAD's.
    """
    settings = suite_container.RunSettings(gpus=gpus, mounts=(runs_dir, job_dir), user=user)
    return suite_container.docker_run_argv(image, settings, suite_args, name=f"cardtime-{job_id}")
