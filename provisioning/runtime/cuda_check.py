"""Before the run starts: the GPU check as a step of the detached job, right after its set-up.

The venv or the image the check needs exists only once the job's set-up (hostruntime.setup_script,
remote_docker.image_setup) has run, so the check runs there too: the text of
provisioning/cuda_check_host.py, by the host venv's python or by `python` in the image through
`docker run` with the suite's own GPU settings. A refusal ends the job with exit 2 before any
stage, its one line in the log and in jobs/<id>/refused, which the laptop shows (follow_and_fetch).
"""

from __future__ import annotations

from pathlib import Path

from provisioning.cuda_check_host import REFUSED
from provisioning.runtime import suite_container
from provisioning.session.shell import join, quote
from suite.hardware.cuda_lines import LINES

# at provisioning/: suite/cluster/slurm.py runs it by that path
HOST_PROGRAM = Path(__file__).parents[1] / "cuda_check_host.py"
REFUSED_FILE = "refused"


def min_drivers() -> dict[str, str]:
    """CUDA major → the oldest driver that runs it (suite/hardware/cuda_lines.py), for the host program's
    refusal."""
    return {str(line.major): line.min_driver_text for line in LINES}


def program_args(*, gpus_seen: int, driver: str | None, where: str) -> list[str]:
    """`python -c <the host program> …`: its text and its arguments, each line's oldest driver included."""
    args = [
        "-c",
        HOST_PROGRAM.read_text(),
        "--gpus",
        str(gpus_seen),
        "--driver",
        driver or "",
        "--where",
        where,
    ]
    for major, minimum in min_drivers().items():
        args += ["--min-driver", f"{major}={minimum}"]
    return args


def host_python_argv(python: str, *, gpus_seen: int, driver: str | None) -> list[str]:
    return [python, *program_args(gpus_seen=gpus_seen, driver=driver, where=f"the host venv ({python})")]


def image_argv(
    image: str, job_id: str, *, gpus_seen: int, driver: str | None, user: str | None = None
) -> list[str]:
    """The image's python through `docker run` with the suite's GPU settings (the run's own user)."""
    settings = suite_container.RunSettings(gpus=True, user=user)
    return suite_container.docker_run_argv(
        image,
        settings,
        ["python", *program_args(gpus_seen=gpus_seen, driver=driver, where=f"the image {image}")],
        name=f"cardtime-cuda-check-{job_id}",
    )


def job_step(argv: list[str], job_dir: str) -> str:
    """The POSIX lines the job's set-up ends with: run the check, keep its output in the log and its
    refusal line in <job_dir>/refused, and end the set-up with exit 2 when it refused."""
    out, refused = quote(f"{job_dir}/cuda-check.out"), quote(f"{job_dir}/{REFUSED_FILE}")
    return (
        'echo "── GPU check: does torch in the runtime run a kernel on every GPU nvidia-smi listed?"\n'
        f"if {join(argv)} > {out} 2>&1; then rc=0; else rc=$?; fi\n"
        f"cat {out}\n"
        'if [ "$rc" -ne 0 ]; then\n'
        f"  sed -n {quote('s/^' + REFUSED + '//p')} {out} | tail -n 1 > {refused}\n"
        f'  [ -s {refused} ] || echo "the GPU check itself failed (exit $rc): see the job\'s log" > '
        f"{refused}\n"
        "  exit 2\n"
        "fi\n"
    )
