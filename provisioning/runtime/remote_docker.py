"""RUNTIME=docker on the host: the image (IMAGE= pulled, else built on the host's engine from the
local HEAD, on the CUDA line preflight chose), and the `docker run` command line the detached job runs.

The image is pulled or built by the host's own `docker` inside the detached job (jobs.py), so a
build of tens of minutes outlives a sleeping laptop. The build context is `git archive HEAD`,
made on the laptop and sent as a tar, so the image holds exactly the commit the host runs, never
uncommitted files (and the host needs no git). The container runs in the foreground of the
detached job (provisioning/job/jobs.py), so pid, log, exit code and re-attach work exactly as with
RUNTIME=host; its settings are suite_container.RunSettings' (GPUs, host network and IPC,
ulimits, the host user's uid), and the run and job folders are mounted at the same paths inside
as outside, so every path the suite records (LAST, the manifest) is valid on the host too.
"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

from provisioning.job.codesync import LocalCheckout
from provisioning.runtime import host_kernel_log, images, suite_container
from provisioning.runtime.efa import Efa
from provisioning.session.connection import Remote
from provisioning.session.shell import quote
from suite.hardware.cuda_lines import DEFAULT, CudaLine


def image_tag(commit: str, line: CudaLine | None = None) -> str:
    """cardtime:<commit[:12]>, with the CUDA line when it is not the Dockerfile's default."""
    suffix = f"-{line.name}" if line is not None and line != DEFAULT else ""
    return f"cardtime:{commit[:12]}{suffix}"


def image_setup(
    remote: Remote,
    local: LocalCheckout,
    image: str | None,
    base: str,
    say=print,
    line: CudaLine | None = None,
) -> tuple[str, str]:
    """(the image the job runs, the POSIX script the detached job runs first to make it present):
    IMAGE= pulled (or the host's copy), else cardtime:<commit> of `line` built by the host's docker
    from HEAD's files, shipped now as a tar, so a long build outlives the laptop as the run does."""
    q = quote
    if image:
        say(f"the job pulls {image} first: the run uses the code inside this image, not the shipped HEAD")
        return image, (
            f"docker pull {q(image)} || {{ docker image inspect {q(image)} > /dev/null && "
            f"echo {q(f'pull failed; using the copy of {image} already on the host')}; }}\n"
        )
    tag = image_tag(local.commit, line)
    context = f"{base}/images/{local.commit}.tar"
    if remote.run(["test", "-s", context], check=False).exit_code != 0:
        remote.run(["mkdir", "-p", "--", f"{base}/images"], what="cannot create the images folder")
        with tempfile.TemporaryDirectory() as tmp:
            archive = Path(tmp) / "context.tar"
            subprocess.run(
                ["git", "-C", str(local.root), "archive", "--format=tar", "-o", str(archive), local.commit],
                check=True,
                capture_output=True,
            )
            say(f"sending the build context ({archive.stat().st_size / 1e6:.1f} MB, HEAD's files only)")
            remote.sftp().put(str(archive), context + ".part")
        remote.run(["mv", "-f", "--", context + ".part", context])
    say(
        f"the job builds {tag}{f' (CUDA {line.cuda})' if line else ''} first unless the host has it "
        "(first build: tens of minutes, detached)"
    )
    buildargs = "".join(f" --build-arg {q(f'{k}={v}')}" for k, v in image_buildargs(local, line).items())
    return tag, (
        f"if docker image inspect {q(tag)} > /dev/null 2>&1; then echo "
        f"{q(f'image {tag} already on the host')}; "
        f"else docker build --tag {q(tag)}{buildargs} - < {q(context)}; fi\n"
    )


def image_buildargs(local: LocalCheckout, line: CudaLine | None = None) -> dict[str, str]:
    """The image's build arguments for this checkout: its commit, and `line`'s base image and torch index."""
    return {
        **images.commit_buildargs(local.root, local.commit),
        **(line.build_args() if line is not None else {}),
    }


def run_argv(
    image: str,
    *,
    job_id: str,
    job_dir: str,
    runs_dir: str,
    suite_args: list[str],
    gpus: bool,
    user: str | None = None,
    rdma: bool = False,
    efa: Efa | None = None,
) -> list[str]:
    """`docker run` of the suite in the foreground of the job, with suite_container's settings; the stage
    finds the host's kernel log the set-up read (host_kernel_log.py) in the job's folder.

    CARDTIME_COMMIT is the image's own (a build argument): with IMAGE= the code is the image's, not HEAD's.
    """
    settings = suite_container.RunSettings(
        gpus=gpus,
        mounts=(runs_dir, job_dir),
        user=user,
        rdma=rdma and gpus,
        host_folders=efa.folders if efa else (),
        environment={**host_kernel_log.environment(job_dir), **(efa.environment if efa else {})},
    )
    return suite_container.docker_run_argv(image, settings, suite_args, name=f"cardtime-{job_id}")
