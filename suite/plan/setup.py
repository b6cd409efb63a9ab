"""`make plan`'s set-up lines: the minutes a renter pays before the first stage and after the last.

    python -m suite plan --rate 24 --image build --download-rate 25      # MB/s, e.g. preflight's measurement

Before: the image (pulled: its compressed size ÷ the box's download rate plus unpacking; or built: each
step's downloads ÷ the rate plus its fixed work), the code sync and, on the host runtime, the venv.
After: the fetch of the run directory back to the laptop. Archiving goes from the laptop once the
run is fetched, so it is listed but not billed (the box can be released first). The sizes are the
README's estimates of the CUDA image; the rate is preflight's measurement when there is one, else a
stated default. Plain arithmetic.
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
    image_pull_bytes: float = 8 * GB
    """The CUDA image compressed (README: ~8 GB to pull)."""
    image_disk_bytes: float = 17 * GB
    """The CUDA image unpacked (README: ~17 GB on disk)."""
    unpack_Bps: float = 200 * MB
    """Layers decompressed and written to the box's disk."""
    base_bytes: float = 4.5 * GB
    """The CUDA devel base image, compressed (README)."""
    torch_bytes: float = 3 * GB
    """torch's CUDA wheels (README)."""
    tools_bytes: float = 0.8 * GB
    """nsys (~0.3 GB), MPI and the rest of the packages (README: under 0.5 GB)."""
    install_s: float = 120.0
    """apt and pip unpacking and installing what they downloaded."""
    nccl_tests_compile_s: float = 300.0
    """nccl-tests' compile for sm_80/90/100 (README: ~5 minutes on many cores)."""
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


def _rate(a: SetupAssumptions) -> str:
    return f"{a.download_Bps / MB:g} MB/s ({a.download_basis})"


def image_lines(a: SetupAssumptions) -> list[SetupLine]:
    if a.image == "pull":
        seconds = a.image_pull_bytes / a.download_Bps + a.image_disk_bytes / a.unpack_Bps
        return [SetupLine("image pull", seconds, f"{a.image_pull_bytes / GB:g} GB at {_rate(a)} + "
                                                 f"{a.image_disk_bytes / GB:g} GB unpacked at {a.unpack_Bps / MB:g} MB/s")]
    downloads = a.base_bytes + a.torch_bytes + a.tools_bytes
    seconds = downloads / a.download_Bps + a.image_disk_bytes / a.unpack_Bps + a.install_s + a.nccl_tests_compile_s
    return [SetupLine("image build", seconds,
                      f"{downloads / GB:g} GB of base, torch and tools at {_rate(a)} + {a.image_disk_bytes / GB:g} GB "
                      f"unpacked + {a.install_s:g} s installing + {a.nccl_tests_compile_s:g} s compiling nccl-tests")]


def venv_line(a: SetupAssumptions) -> SetupLine:
    if a.runtime == "docker":
        return SetupLine("venv", 0.0, "inside the image")
    return SetupLine("venv", a.torch_bytes / a.download_Bps + a.install_s,
                     f"torch's CUDA wheels, {a.torch_bytes / GB:g} GB at {_rate(a)} + {a.install_s:g} s installing")


def before(a: SetupAssumptions) -> list[SetupLine]:
    """What the box is billed for before the first stage."""
    image = image_lines(a) if a.runtime == "docker" else [SetupLine("image", 0.0, "host runtime: no image")]
    sync = SetupLine("code sync", a.ssh_s + a.code_bytes / a.upload_Bps,
                     f"{a.code_bytes / MB:g} MB at {a.upload_Bps / MB:g} MB/s up + {a.ssh_s:g} s of SSH")
    return image + [sync, venv_line(a)]


def after(a: SetupAssumptions) -> list[SetupLine]:
    """After the last stage: the fetch (box still held) and the archive (from the laptop, box released)."""
    return [SetupLine("fetch", a.ssh_s + a.run_bytes / a.fetch_Bps,
                      f"{a.run_bytes / GB:g} GB at {a.fetch_Bps / MB:g} MB/s down + {a.ssh_s:g} s of SSH"),
            SetupLine("archive", a.run_bytes / a.upload_Bps,
                      f"{a.run_bytes / GB:g} GB from the laptop at {a.upload_Bps / MB:g} MB/s: after the box is "
                      f"released, not billed", billed=False)]


def check(a: SetupAssumptions) -> None:
    """ValueError naming the bad assumption (the command turns it into one line)."""
    if a.image not in ("build", "pull"):
        raise ValueError(f"--image {a.image!r}: build or pull")
    if a.runtime not in ("docker", "host"):
        raise ValueError(f"--runtime {a.runtime!r}: docker or host")
    if not a.download_Bps > 0:
        raise ValueError(f"--download-rate {a.download_Bps / MB:g}: a rate in MB/s above 0")
