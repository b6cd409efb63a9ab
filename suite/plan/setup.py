"""`make plan`'s set-up lines: the minutes a renter pays before the first stage and after the last.

    python -m suite plan --rate 24 --image build --download-rate 25      # MB/s, e.g. preflight's measurement

Before: the image (pulled: its compressed size ÷ the box's download rate plus unpacking; or built: each
step's downloads ÷ the rate plus its fixed work), the code sync and, on the host runtime, the venv.
After: the fetch of the run directory back to the laptop. Archiving goes from the laptop once the
run is fetched, so it is listed but not billed (the box can be released first). The rate is
preflight's measurement when there is one, else a stated default. Plain arithmetic.

The image's figures are the Dockerfile's build from PyPI's CUDA wheels on the Debian base, measured
where the project is built (docker/build-cuda-image.sh ci; `make bench` prints them) and scaled to a
rented box, each field saying which: the download sizes are measured (apt's "Need to get", PyPI's
file sizes) except torch's CUDA dependencies and nsys, which no machine here can fetch; the fixed work
(unpacking, nccl-tests' compile) was measured on 2 CPU cores shared with other jobs and is divided by
BOX_SPEEDUP for a box's idle cores.
"""

from __future__ import annotations

from dataclasses import dataclass

GB = 1e9
MB = 1e6


@dataclass(frozen=True, kw_only=True)
class SetupAssumptions:
    download_Bps: float = 25 * MB
    """The box's download rate from the registries; 25 MB/s (200 Mbit/s) unless preflight measured one."""
    download_basis: str = "assumed: preflight not run; pass --download-rate with its measurement"
    image: str = "build"
    """`build` on the box (make remote without IMAGE=) or `pull` a pushed image (IMAGE=…)."""
    runtime: str = "docker"
    """`docker` (the venv is inside the image) or `host` (a venv is made on the box)."""
    apt_bytes: float = 144 * MB
    """Debian's g++, make, Open MPI, git, Python (measured: the build's "Need to get 144 MB of archives")."""
    cuda_wheels_bytes: float = 310 * MB
    """cuda-toolkit[nvcc,cudart,cccl,crt] 13.0.3 and nvidia-nccl-cu13 2.29.7 (measured: PyPI's sizes of the
    seven wheels, NCCL 206 MB, nvvm 62 MB, nvcc 37 MB)."""
    torch_bytes: float = 2.8 * GB
    """torch's CUDA build and its other CUDA wheels (cuDNN, cuBLAS, …): ~3 GB less NCCL, counted above.
    torch's own wheel is 0.53 GB (PyPI's index); the rest is an estimate (those wheels do not resolve
    here)."""
    nsys_bytes: float = 0.5 * GB
    """Nsight Systems from NVIDIA's apt repository (an estimate: the repository does not answer here)."""
    base_bytes: float = 50 * MB
    """debian:bookworm-slim, pulled by the build (~50 MB compressed; here the local debootstrap'd base)."""
    image_disk_bytes: float = 9 * GB
    """The CUDA image unpacked: measured 3.0 GB with torch's CPU wheel and no nsys (CI's image), plus torch's
    CUDA build and its wheels unpacked (~6 GB) and nsys (~1 GB)."""
    unpack_Bps: float = 200 * MB
    """Layers decompressed and written to the box's disk."""
    install_s: float = 100.0
    """apt and pip unpacking and installing: measured 400 s here (apt 308 s, the CUDA wheels 92 s, downloads
    included) on 2 shared cores, ÷ BOX_SPEEDUP."""
    nccl_tests_compile_s: float = 240.0
    """nccl-tests for sm_75–sm_120 (six cubins and PTX). Measured here: two architectures in ~3 minutes on 2
    idle cores (shared/vendor/README.md); six and PTX are ~3.5× that, ~10 minutes (a full build here, on 2
    cores under a load of ~20, was cut at 21 minutes with verifiable.cu, the longest source, half done). ÷
    BOX_SPEEDUP gives 150 s; 240 s leaves verifiable.cu, which no -j splits, its own minutes."""
    code_bytes: float = 20 * MB
    """The working tree synced to the box (sources and test captures)."""
    upload_Bps: float = 5 * MB
    """The laptop's upload rate (code sync, archive): 40 Mbit/s broadband."""
    ssh_s: float = 10.0
    """SSH connection, host-key check and remote commands around each transfer."""
    run_bytes: float = 2 * GB
    """The run directory fetched back: eight nsys reports and their SQLite exports dominate."""
    fetch_Bps: float = 12.5 * MB
    """The laptop's download rate from the box: 100 Mbit/s broadband."""


@dataclass(frozen=True)
class SetupLine:
    step: str
    seconds: float
    basis: str
    billed: bool = True
    """Whether the box is held (and billed) while it happens."""


BOX_SPEEDUP = 4
"""A rented box's idle cores against the 2 shared ones the build was measured on (a stated factor)."""


def _rate(a: SetupAssumptions) -> str:
    return f"{a.download_Bps / MB:g} MB/s ({a.download_basis})"


def image_pull_bytes(a: SetupAssumptions) -> float:
    """The pushed image compressed: its layers are mostly the debs and wheels, which are compressed
    already."""
    return a.base_bytes + a.apt_bytes + a.cuda_wheels_bytes + a.torch_bytes + a.nsys_bytes


def image_lines(a: SetupAssumptions) -> list[SetupLine]:
    pull = image_pull_bytes(a)
    if a.image == "pull":
        seconds = pull / a.download_Bps + a.image_disk_bytes / a.unpack_Bps
        return [
            SetupLine(
                "image pull",
                seconds,
                f"{pull / GB:.2g} GB at {_rate(a)} + "
                f"{a.image_disk_bytes / GB:g} GB unpacked at {a.unpack_Bps / MB:g} MB/s",
            )
        ]
    seconds = pull / a.download_Bps + a.image_disk_bytes / a.unpack_Bps + a.install_s + a.nccl_tests_compile_s
    return [
        SetupLine(
            "image build",
            seconds,
            f"{pull / GB:.2g} GB of debs, CUDA wheels, torch and nsys at {_rate(a)} + "
            f"{a.image_disk_bytes / GB:g} GB written + {a.install_s:g} s installing + "
            f"{a.nccl_tests_compile_s:g} s compiling nccl-tests (measured here, ÷ {BOX_SPEEDUP})",
        )
    ]


def venv_line(a: SetupAssumptions) -> SetupLine:
    if a.runtime == "docker":
        return SetupLine("venv", 0.0, "inside the image")
    return SetupLine(
        "venv",
        a.torch_bytes / a.download_Bps + a.install_s,
        f"torch's CUDA wheels, {a.torch_bytes / GB:g} GB at {_rate(a)} + {a.install_s:g} s installing",
    )


def before(a: SetupAssumptions) -> list[SetupLine]:
    """What the box is billed for before the first stage."""
    image = image_lines(a) if a.runtime == "docker" else [SetupLine("image", 0.0, "host runtime: no image")]
    sync = SetupLine(
        "code sync",
        a.ssh_s + a.code_bytes / a.upload_Bps,
        f"{a.code_bytes / MB:g} MB at {a.upload_Bps / MB:g} MB/s up + {a.ssh_s:g} s of SSH",
    )
    return image + [sync, venv_line(a)]


def after(a: SetupAssumptions) -> list[SetupLine]:
    """After the last stage: the fetch (box still held) and the archive (from the laptop, box released)."""
    return [
        SetupLine(
            "fetch",
            a.ssh_s + a.run_bytes / a.fetch_Bps,
            f"{a.run_bytes / GB:g} GB at {a.fetch_Bps / MB:g} MB/s down + {a.ssh_s:g} s of SSH",
        ),
        SetupLine(
            "archive",
            a.run_bytes / a.upload_Bps,
            f"{a.run_bytes / GB:g} GB from the laptop at {a.upload_Bps / MB:g} MB/s: after the box is "
            f"released, not billed",
            billed=False,
        ),
    ]


def check(a: SetupAssumptions) -> None:
    """ValueError naming the bad assumption (the command turns it into one line)."""
    if a.image not in ("build", "pull"):
        raise ValueError(f"--image {a.image!r}: build or pull")
    if a.runtime not in ("docker", "host"):
        raise ValueError(f"--runtime {a.runtime!r}: docker or host")
    if not a.download_Bps > 0:
        raise ValueError(f"--download-rate {a.download_Bps / MB:g}: a rate in MB/s above 0")
