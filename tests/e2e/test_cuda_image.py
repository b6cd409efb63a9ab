"""The CUDA image CI builds (Dockerfile through docker/build-cuda-image.sh ci, before `make test`), checked
inside.

CI's build is the user's Dockerfile with three build arguments: torch's CPU wheel instead of the ~3 GB CUDA
build (TORCH_BUILD=cpu), nccl-tests from the vendored tarball (CI cannot reach GitHub) and no nsys (nor
NVIDIA's apt repository). The CUDA wheels — cuda-toolkit 13.0.3 and nvidia-nccl-cu13 2.29.7, torch 2.13.0's
own pins — and nccl-tests' compile are the user's. In the image:

  1. nccl-tests' binaries run: `all_reduce_perf -h` exits 0 (without a GPU that is as far as they go);
  2. `ldd` resolves their libnccl.so.2 to the NCCL wheel's file, and torch's CUDA build would load that very
     file (with the CPU torch of CI this is shown from torch's layout, and the test says so);
  3. the entry point's version lines name one CUDA line;
  4. the rehearsal's cheap stages run inside it (gloo, the run folder mounted) and complete.

Cost: seconds per check, the rehearsal ~1 minute; the build itself is .ci/run's (~10 minutes the first time).
Skipped, with the reason, where the image was not built (capability cuda-image).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import warnings
from pathlib import Path

import pytest

from suite.hardware import cuda_lines

pytestmark = [pytest.mark.e2e, pytest.mark.needs("docker", "cuda-image"), pytest.mark.timeout(900)]

IMAGE = os.environ.get("CARDTIME_CUDA_IMAGE", "cardtime:cuda-ci")
LINE = cuda_lines.DEFAULT


def docker(*args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout)


def in_image(*command: str, timeout: int = 300) -> subprocess.CompletedProcess:
    """COMMAND in a throwaway container of the image (the entry point runs a command on PATH as itself)."""
    return docker("run", "--rm", "--network", "none", IMAGE, *command, timeout=timeout)


@pytest.fixture(scope="module", autouse=True)
def built_image():
    try:
        found = docker("image", "inspect", IMAGE, timeout=60)
    except (FileNotFoundError, subprocess.TimeoutExpired) as e:
        pytest.skip(f"no Docker engine answers: {e}")
    if found.returncode != 0:
        pytest.skip(f"{IMAGE} is not built: docker/build-cuda-image.sh ci ({found.stderr.strip()[:200]})")
    return json.loads(found.stdout)[0]


@pytest.fixture(scope="module")
def torch_build() -> str:
    return in_image("cat", "/opt/cardtime-torch-build").stdout.strip()


def test_nccl_tests_run_and_every_binary_is_there():
    help_ = in_image("all_reduce_perf", "-h")
    assert help_.returncode == 0, help_.stderr
    assert "USAGE: all_reduce_perf" in help_.stdout and "--nthreads" in help_.stdout  # its own usage text
    listed = in_image("ls", "/opt/nccl-tests/bin").stdout.split()
    for name in (
        "all_reduce_perf",
        "all_gather_perf",
        "reduce_scatter_perf",
        "alltoall_perf",
        "sendrecv_perf",
    ):
        assert name in listed, listed
    assert in_image("cat", "/opt/nccl-tests/VERSION").stdout.strip() == "v2.19.6"


def test_nccl_tests_were_compiled_for_every_architecture_the_line_claims():
    assert in_image("cat", "/opt/nccl-tests/NVCC_GENCODE").stdout.strip() == LINE.nvcc_gencode
    assert in_image("cat", "/opt/nccl-tests/NCCL_VERSION").stdout.strip() == LINE.nccl_version


def test_nccl_tests_and_torch_load_one_libnccl(torch_build):
    ldd = in_image("ldd", "/opt/nccl-tests/bin/all_reduce_perf")
    assert ldd.returncode == 0, ldd.stderr
    (resolved,) = re.findall(r"libnccl\.so\.2 => (\S+)", ldd.stdout)
    # cudart and NCCL from the wheels, by the ld.so.conf.d entry
    assert "not found" not in ldd.stdout, ldd.stdout
    real = in_image("realpath", resolved).stdout.strip()
    # The wheel's file: site-packages/nvidia/nccl/lib/libnccl.so.2 of the venv, installed by nvidia-nccl-cu13.
    probe = in_image(
        "python",
        "-c",
        """
import json, os, sys, sysconfig
from importlib import metadata
import torch
site = sysconfig.get_paths()["purelib"]
wheel = metadata.distribution("nvidia-nccl-cu13")
files = [str(f) for f in wheel.files if f.name == "libnccl.so.2"]
out = {"wheel_file": os.path.realpath(os.path.join(site, files[0])), "wheel_version": wheel.version,
       "torch_cuda": torch.version.cuda,
       # torch's CUDA build finds NCCL two ways, both relative to its own folder: libtorch_cuda.so's RUNPATH
       # $ORIGIN/../../nvidia/nccl/lib, and torch/__init__.py's _load_global_deps, which preloads
       # nvidia/nccl/lib/libnccl.so.* from site-packages.
       "torch_layout": os.path.realpath(os.path.join(os.path.dirname(torch.__file__), "lib", "..", "..",
                                                     "nvidia", "nccl", "lib", "libnccl.so.2"))}
maps = open("/proc/self/maps").read()
out["loaded"] = sorted({line.split()[-1] for line in maps.splitlines() if "libnccl.so" in line})
print(json.dumps(out))
""",
    )
    assert probe.returncode == 0, probe.stderr
    facts = json.loads(probe.stdout.strip().splitlines()[-1])
    assert real == facts["wheel_file"], (real, facts)
    assert facts["wheel_version"] == LINE.nccl_version
    assert facts["torch_layout"] == real
    if torch_build == "cuda":  # the user's image: torch has loaded NCCL at import; it must be that file
        assert facts["torch_cuda"].split(".")[0] == str(LINE.major)
        assert [os.path.realpath(p) for p in facts["loaded"]] == [real], facts["loaded"]
    else:
        assert torch_build == "cpu" and facts["torch_cuda"] is None and facts["loaded"] == []
        warnings.warn(
            f"{IMAGE} has torch's CPU build (TORCH_BUILD=cpu, as CI builds it): that torch's CUDA build "
            f"loads {real} is shown from its layout (RUNPATH $ORIGIN/../../nvidia/nccl/lib, "
            "_load_global_deps), not by loading it",
            stacklevel=1,
        )


def test_the_entrypoints_version_lines_name_one_cuda_line(torch_build):
    done = docker("run", "--rm", "--network", "none", IMAGE, "run", "--list", timeout=300)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    versions = dict(
        line.split(None, 1) for line in lines[1 : lines.index("---- python -m suite run --list")] if line
    )
    assert versions["cuda-line"] == LINE.name
    assert versions["cuda-toolkit"].startswith(f"{LINE.major}.")  # nvcc of the wheels
    assert versions["nccl-wheel"] == f"{LINE.nccl_package} {LINE.nccl_version}"
    assert versions["nccl-tests-nccl"] == LINE.nccl_version
    assert versions["driver"] == "none" and versions["nsys"] == "none"  # no GPU here, no nsys in CI: said
    torch_cuda = re.search(r"\(CUDA ([^)]*)\)", versions["torch"])[1]
    if torch_build == "cuda":
        assert torch_cuda.split(".")[0] == str(LINE.major), versions["torch"]
    else:
        assert versions["torch"].startswith("2.13.0+cpu") and torch_cuda == "none, a CPU build"


def test_the_rehearsal_runs_inside_the_cuda_image(tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    done = docker(
        "run",
        "--rm",
        "--network",
        "host",
        "--ipc",
        "host",
        "-v",
        f"{runs}:{runs}",
        IMAGE,
        "run",
        "--profile",
        "gloo-cpu",
        "--stages",
        "topology,bandwidth",
        "--out",
        str(runs),
        "--record-last",
        str(runs / "LAST"),
        timeout=900,
    )
    assert (runs / "LAST").exists(), done.stdout[-3000:] + done.stderr[-2000:]
    run_dir = Path((runs / "LAST").read_text().strip())
    manifest = json.loads((run_dir / "manifest.json").read_text())
    for stage in ("topology", "bandwidth"):
        assert manifest["stages"][stage]["status"] == "complete", manifest["stages"][stage]
        assert any((run_dir / "raw" / stage).iterdir())
    assert manifest["versions"]["torch"].startswith("2.13.0")
    verdicts = json.loads((run_dir / "verdicts.json").read_text())["verdicts"]
    assert not [v for v in verdicts if v["status"] == "fail"], [v for v in verdicts if v["status"] == "fail"]
