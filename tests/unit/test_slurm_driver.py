"""make slurm's CUDA line from a compute node's driver (provisioning/slurm/cuda_probe.py); the drivers are
those of real captures (tests/data/health/, each with its source), printed the way `--format=csv,noheader`
prints them."""

from __future__ import annotations

import re
from pathlib import Path

from provisioning.slurm.cuda_probe import line_from_probe, probe_argv, probe_command

DATA = Path(__file__).resolve().parents[1] / "data" / "health"


def captured_driver(name: str) -> str:
    return re.search(r'"driver_version":\s*"([^"]+)"', (DATA / name).read_text()).group(1)


def test_probe_is_one_immediate_task_on_the_partition():
    argv = probe_argv("gpu", "proj")
    assert argv[:5] == ["srun", "--nodes=1", "--ntasks=1", "--partition=gpu", "--account=proj"]
    assert "--immediate=120" in argv and argv[-3:] == [
        "nvidia-smi",
        "--query-gpu=driver_version",
        "--format=csv,noheader",
    ]
    assert probe_command("gpu", slurm_conf="/x/slurm.conf").startswith(
        "export SLURM_CONF=/x/slurm.conf; srun "
    )


def test_a_550_or_535_node_gets_cu126_and_a_580_node_cu130():
    h200, a10 = (
        captured_driver("nvsmi-q-08-h200-550-healthy.json"),
        captured_driver("nvsmi-q-02-a10-remapped-rows-pending-535.json"),
    )
    assert (h200, a10) == ("550.90.12", "535.129.03")
    line, driver = line_from_probe("gpu", 0, f"{h200}\n{h200}\n", "")
    assert line.name == "cu126" and driver == h200
    line, driver = line_from_probe("gpu", 0, "580.95.05\n", "")
    assert line.name == "cu130"
    line, driver = line_from_probe("gpu", 0, f"580.95.05\n{a10}\n", "")  # mixed: the oldest decides
    assert line.name == "cu126" and driver == a10


def test_no_answer_or_too_old_is_refused_in_one_line():
    line, said = line_from_probe(
        "gpu", 1, "", "srun: error: Unable to allocate resources: Invalid partition name"
    )
    assert line is None and "\n" not in said
    assert said.startswith(
        "a compute node of PARTITION=gpu did not tell its NVIDIA driver (srun nvidia-smi: srun: "
        "error: Unable to allocate resources: Invalid partition name): pass CUDA_LINE=cu130"
    )
    line, said = line_from_probe("gpu", 0, "470.57.02\n", "")
    assert line is None and said.startswith(
        "PARTITION=gpu's compute node: driver 470.57.02 is older than every"
    )


def test_pyxis_words_in_the_batch_script_expand_per_job(tmp_path):
    """The batch script's CARDTIME_SRUN_ARGS line run by bash for real (SLURM_JOB_ID set as Slurm sets it),
    then split as suite/cluster/multilaunch.py splits it: the image, one container name per job, the checkout
    and the runs folder mounted at their own paths, the checkout the workdir."""
    import os
    import shlex
    import subprocess

    from suite.cluster.slurm import SRUN_ARGS_ENV, sbatch_script
    from suite.cluster.slurm_pyxis import node_python, srun_mpi_words

    script = sbatch_script(
        checkout="/shared/a/code/c1",
        python="/shared/a/venvs/v/bin/python",
        nodes=2,
        gpus_per_node=8,
        partition="gpu",
        out="/shared/a/runs",
        container_image="nvcr.io#nvidia/pytorch:25.01-py3",
    )
    (line,) = [line for line in script.splitlines() if line.startswith(f"export {SRUN_ARGS_ENV}=")]
    shown = subprocess.run(
        ["bash", "-c", f'SLURM_JOB_ID=4242\n{line}\nprintf %s "${SRUN_ARGS_ENV}"'],
        capture_output=True,
        text=True,
        env={"PATH": os.environ["PATH"]},
    ).stdout
    words = shlex.split(shown)
    assert words == [
        "--container-image=nvcr.io#nvidia/pytorch:25.01-py3",
        "--container-name=cardtime-4242",
        "--container-mounts=/shared/a/code/c1:/shared/a/code/c1,/shared/a/runs:/shared/a/runs",
        "--container-workdir=/shared/a/code/c1",
    ]
    assert node_python(words, "/shared/a/venvs/v/bin/python") == "python"
    assert node_python([], "/v/bin/python") == "/v/bin/python"
    assert srun_mpi_words(2, 8, words)[:6] == [
        "srun",
        "--nodes=2",
        "--ntasks=16",
        "--ntasks-per-node=8",
        "--mpi=pmix",
        "--kill-on-bad-exit=1",
    ]


def test_a_chosen_cuda_line_is_held_to_the_compute_nodes_driver():
    """CUDA_LINE=cu130 on a node whose driver (a real capture's) is 550: refused in one line before the venv
    is built or the job queued; a driver that runs it, or a probe that told nothing, lets the choice stand."""
    from provisioning.slurm.cuda_probe import chosen_line_problem
    from suite.hardware.cuda_lines import line_named

    h200 = captured_driver("nvsmi-q-08-h200-550-healthy.json")
    said = chosen_line_problem("gpu", line_named("cu130"), 0, f"{h200}\n")
    assert said.startswith(
        f"CUDA_LINE=cu130 on PARTITION=gpu's compute node: driver {h200} is too old for CUDA 13"
    )
    assert "use CUDA_LINE=cu126" in said and "\n" not in said
    assert chosen_line_problem("gpu", line_named("cu126"), 0, f"{h200}\n") is None
    assert chosen_line_problem("gpu", line_named("cu130"), 0, "580.95.05\n") is None
    # no answer: the job's GPU check decides
    assert chosen_line_problem("gpu", line_named("cu130"), 1, "") is None
    old = chosen_line_problem("gpu", line_named("cu126"), 0, "470.57.02\n")
    assert "470.57.02 is older than every CUDA line" in old


def test_a_docker_style_image_is_given_to_pyxis_in_enroots_form():
    """pyxis reads `REGISTRY#IMAGE:TAG` (enroot's URI); `nvcr.io/nvidia/pytorch` would be looked up on Docker
    Hub. IMAGE= as Docker writes it is turned into enroot's; what is enroot's already, Docker Hub names and
    squashfs files stay."""
    from suite.cluster.slurm_pyxis import container_srun_args, pyxis_image

    assert {
        image: pyxis_image(image)
        for image in (
            "nvcr.io/nvidia/pytorch:25.01-py3",
            "localhost:5000/cardtime:cuda",
            "alice@registry.example.com/team/img@sha256:0123",
            "nvcr.io#nvidia/pytorch:25.01-py3",
            "nvidia/cuda:12.6.3-devel-ubuntu24.04",
            "ubuntu:24.04",
            "/shared/images/cardtime.sqsh",
        )
    } == {
        "nvcr.io/nvidia/pytorch:25.01-py3": "nvcr.io#nvidia/pytorch:25.01-py3",
        "localhost:5000/cardtime:cuda": "localhost:5000#cardtime:cuda",
        "alice@registry.example.com/team/img@sha256:0123": "alice@registry.example.com#team/img@sha256:0123",
        "nvcr.io#nvidia/pytorch:25.01-py3": "nvcr.io#nvidia/pytorch:25.01-py3",
        "nvidia/cuda:12.6.3-devel-ubuntu24.04": "nvidia/cuda:12.6.3-devel-ubuntu24.04",
        "ubuntu:24.04": "ubuntu:24.04",
        "/shared/images/cardtime.sqsh": "/shared/images/cardtime.sqsh",
    }
    words = container_srun_args("nvcr.io/nvidia/pytorch:25.01-py3", "/shared/c", "/shared/runs").split()
    assert words[0] == "--container-image=nvcr.io#nvidia/pytorch:25.01-py3"


def test_under_pyxis_nccl_tests_is_looked_for_in_the_image_not_on_the_batch_host(tmp_path, monkeypatch):
    """A stand-in srun (pyxis is not on this machine) that drops srun's and pyxis's options and runs the rest
    as the image would: with the image's CARDTIME_NCCL_TESTS_DIR and PATH. The batch host's own
    all_gather_perf is not taken; what the image lacks is said missing, with where it was looked for."""
    from suite.cluster.slurm import SRUN_ARGS_ENV
    from suite.config import get_profile
    from suite.stages import _nccl_tests

    image_dir, host_bin, stub_bin = (tmp_path / d for d in ("image-nccl-tests", "host-bin", "stub-bin"))
    for folder in (image_dir / "build", host_bin, stub_bin):
        folder.mkdir(parents=True)
    for path in (image_dir / "build" / "all_reduce_perf_mpi", host_bin / "all_gather_perf"):
        path.write_text("#!/bin/sh\n")
        path.chmod(0o755)
    log = tmp_path / "srun-argv"
    srun = stub_bin / "srun"
    srun.write_text(
        "#!/bin/sh\n"
        f'printf "%s\\n" "$@" > "{log}"\n'
        'while [ $# -gt 0 ]; do case "$1" in --*) shift ;; *) break ;; esac; done\n'
        f'CARDTIME_NCCL_TESTS_DIR="{image_dir}" PATH=/usr/bin:/bin exec "$@"\n'
    )
    srun.chmod(0o755)
    monkeypatch.setenv("PATH", f"{stub_bin}:{host_bin}:/usr/bin:/bin")
    monkeypatch.setenv(
        SRUN_ARGS_ENV, "--container-image=nvcr.io#nvidia/pytorch:25.01-py3 --container-name=c-1"
    )
    profile = get_profile("nccl-gpu", 8).with_overrides(nodes=("node-a", "node-b"), node_launcher="srun")
    found, searched = _nccl_tests.binaries(profile, ["all_reduce_perf", "all_gather_perf"])
    assert found == {"all_reduce_perf": image_dir / "build" / "all_reduce_perf_mpi", "all_gather_perf": None}
    assert "in the image" in searched
    argv = log.read_text().splitlines()
    assert argv[:4] == [
        "--nodes=1",
        "--ntasks=1",
        "--container-image=nvcr.io#nvidia/pytorch:25.01-py3",
        "--container-name=c-1",
    ]
    # without pyxis the batch host's own binaries are the ones
    monkeypatch.delenv(SRUN_ARGS_ENV)
    here, _ = _nccl_tests.binaries(profile, ["all_gather_perf"])
    assert here == {"all_gather_perf": host_bin / "all_gather_perf"}
    # an srun that fails says why, in the missing row's words
    srun.write_text("#!/bin/sh\necho 'pyxis: importing image failed' >&2\nexit 1\n")
    monkeypatch.setenv(SRUN_ARGS_ENV, "--container-image=img")
    none, why = _nccl_tests.binaries(profile, ["all_reduce_perf"])
    assert (
        none == {"all_reduce_perf": None}
        and why == "the lookup in the image failed: pyxis: importing image failed"
    )
