"""RUNTIME=docker on the host: the image (pulled with IMAGE=, else built there from the shipped
checkout), and the `docker run` command line the detached job runs.

The container runs in the foreground of the detached job (provisioning/jobs.py), so pid, log,
exit code and re-attach work exactly as with RUNTIME=host. The run and job folders are mounted
at the same paths inside the container as on the host, so every path the suite records (the run
directory in LAST, the manifest's) is valid on the host too.

The image itself (Dockerfile, docker/) and the Docker-SDK helpers for driving an engine from the
laptop (provisioning/container.py) belong to the image's side; this module only builds or pulls
it on the host and runs it.
"""

from __future__ import annotations

from .connection import Remote

BUILD_TIMEOUT_S = 3 * 3600  # a CUDA devel base plus nccl-tests from source: tens of minutes on a fresh host


def image_tag(commit: str) -> str:
    return f"cardtime:{commit[:12]}"


def ensure_image(remote: Remote, code_dir: str, commit: str, image: str | None, say=print) -> str:
    """The image to run: IMAGE= pulled, or cardtime:<commit> built on the host from the shipped checkout."""
    if image:
        say(f"docker pull {image}")
        remote.run(["docker", "pull", "--quiet", image], timeout=BUILD_TIMEOUT_S, what=f"docker pull {image} failed",
                   hint="check IMAGE= and that the host can reach the registry (docker login there if it is private)")
        return image
    tag = image_tag(commit)
    if remote.run(["docker", "image", "inspect", "--format", "{{.Id}}", tag], check=False).exit_code == 0:
        say(f"image {tag} already on the host")
        return tag
    say(f"docker build -t {tag} on the host (first build: tens of minutes)")
    remote.run(["docker", "build", "--quiet", "--build-arg", f"CARDTIME_COMMIT={commit}", "-t", tag, "-f",
                f"{code_dir}/Dockerfile", code_dir], timeout=BUILD_TIMEOUT_S, what=f"docker build of {tag} failed",
               hint="read the build's last lines above; or pass IMAGE= to pull a prebuilt image")
    return tag


def run_argv(image: str, *, job_id: str, job_dir: str, runs_dir: str, suite_args: list[str], gpus: bool,
             commit: str) -> list[str]:
    """`docker run` of the suite: GPUs, host network and IPC (NCCL's shared memory), same-path mounts."""
    argv = ["docker", "run", "--rm", "--name", f"cardtime-{job_id}", "--network", "host", "--ipc", "host",
            # NCCL pins host memory and needs a deep stack for its proxy threads (NVIDIA's container guidance).
            "--ulimit", "memlock=-1", "--ulimit", "stack=67108864",
            "-v", f"{runs_dir}:{runs_dir}", "-v", f"{job_dir}:{job_dir}",
            "-e", "PYTHONUNBUFFERED=1", "-e", f"CARDTIME_COMMIT={commit}"]
    if gpus:
        argv += ["--gpus", "all"]
    return argv + [image, *suite_args]
