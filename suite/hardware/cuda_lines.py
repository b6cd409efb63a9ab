"""The CUDA lines the GPU image and the host runtime can be built on, and which one a driver runs.

One table, read by the Dockerfile's build (provisioning/runtime/container_cli.py passes a line's build
arguments), the host runtime's venv (provisioning/runtime/hostruntime.py installs torch from the line's
wheel index) and preflight (a driver older than the line's minimum is refused before anything is
shipped). Pure and torch-free: it runs on the laptop.

    line_for_driver("550.54.15").name   → 'cu126'   (R550: CUDA 12 only)
    line_for_driver("580.65.06").name   → 'cu130'

Sources:
- Minimum drivers: NVIDIA's CUDA compatibility guide, "Minor Version Compatibility", table 1
  (https://docs.nvidia.com/deploy/cuda-compatibility/minor-version-compatibility.html):
  CUDA 13.x needs a driver >= 580, CUDA 12.x >= 525 (an application built with any 12.x toolkit
  runs on any 12.x-era driver from 525 on, and on every newer driver by backward compatibility).
- torch 2.13's CUDA builds: PyTorch's RELEASE.md compatibility matrix (pytorch/pytorch#187075):
  stable CUDA 12.6 with NCCL 2.29.3 and CUDA 13.0 with NCCL 2.29.7 (the PyPI default, which
  requires nvidia-nccl-cu13==2.29.7: `pip install --dry-run --report` of torch==2.13.0);
  12.6.3 builds for Maxwell to Hopper (no Blackwell), 13.0.2 for Turing to Blackwell.
- nvcc knows sm_100 (Blackwell) from CUDA 12.8 on, so the 12.6 line compiles nccl-tests for
  Ampere and Hopper only, with Hopper PTX for whatever comes next.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

TORCH_VERSION = "2.13.0"  # pyproject.toml's pin; tests/unit/test_cuda_lines.py keeps the two equal


@dataclass(frozen=True)
class CudaLine:
    name: str
    """The wheel index's suffix and the name users pass: CUDA_LINE=cu126."""
    cuda: str
    """The toolkit release of the base image, torch's build and nsys: '13.0.2'."""
    min_driver: tuple[int, ...]
    torch_index: str
    """pip's --index-url for torch==TORCH_VERSION of this line."""
    base_image: str
    nccl_package: str
    """The wheel torch ships NCCL in; nccl-tests is built against the same library."""
    nccl_version: str
    nvcc_gencode: str
    gpus: str
    """Which GPU generations its torch build has kernels for, for messages."""

    @property
    def major(self) -> int:
        return int(self.cuda.split(".")[0])

    @property
    def min_driver_text(self) -> str:
        return ".".join(map(str, self.min_driver))

    def build_args(self) -> dict[str, str]:
        """The Dockerfile's build arguments that make the image this line (see the Dockerfile's ARGs)."""
        return {"BASE": self.base_image, "TORCH_INDEX_URL": self.torch_index, "NCCL_PACKAGE": self.nccl_package,
                "NVCC_GENCODE": self.nvcc_gencode}


def _gencode(*sms: int, ptx: int) -> str:
    codes = [f"-gencode=arch=compute_{sm},code=sm_{sm}" for sm in sms]
    return " ".join(codes + [f"-gencode=arch=compute_{ptx},code=compute_{ptx}"])


LINES: tuple[CudaLine, ...] = (  # newest first: line_for_driver takes the first one the driver runs
    CudaLine(name="cu130", cuda="13.0.2", min_driver=(580,), torch_index="https://download.pytorch.org/whl/cu130",
             base_image="nvidia/cuda:13.0.2-devel-ubuntu24.04", nccl_package="nvidia-nccl-cu13",
             nccl_version="2.29.7", nvcc_gencode=_gencode(80, 90, 100, ptx=100),
             gpus="Turing to Blackwell (sm_75–sm_120)"),
    CudaLine(name="cu126", cuda="12.6.3", min_driver=(525,), torch_index="https://download.pytorch.org/whl/cu126",
             base_image="nvidia/cuda:12.6.3-devel-ubuntu24.04", nccl_package="nvidia-nccl-cu12",
             nccl_version="2.29.3", nvcc_gencode=_gencode(80, 90, ptx=90),
             gpus="Maxwell to Hopper (sm_50–sm_90), no Blackwell"),
)
DEFAULT = LINES[0]
"""The Dockerfile's defaults and PyPI's torch build."""


class DriverTooOld(ValueError):
    pass


def parse_driver(text: str) -> tuple[int, ...]:
    """'550.54.15' (nvidia-smi's driver_version; the first of several lines) → (550, 54, 15)."""
    first = (text or "").strip().splitlines()[0].strip() if (text or "").strip() else ""
    if not re.fullmatch(r"\d+(\.\d+){0,3}", first):
        raise ValueError(f"not a driver version: {text!r} (expected e.g. 550.54.15, as "
                         "`nvidia-smi --query-gpu=driver_version --format=csv,noheader` prints it)")
    return tuple(int(part) for part in first.split("."))


def line_named(name: str) -> CudaLine:
    for line in LINES:
        if line.name == name:
            return line
    raise ValueError(f"CUDA_LINE={name} unknown: use one of {', '.join(line.name for line in LINES)}")


def line_for_driver(driver_version: str) -> CudaLine:
    """The newest line whose CUDA the driver runs; DriverTooOld when it runs none of them."""
    driver = parse_driver(driver_version)
    for line in LINES:
        if driver >= line.min_driver:
            return line
    oldest = LINES[-1]
    raise DriverTooOld(f"driver {driver_version.strip()} is older than every CUDA line of torch {TORCH_VERSION} "
                       f"(the oldest, CUDA {oldest.cuda}, needs ≥ {oldest.min_driver_text}): update the NVIDIA driver "
                       f"to ≥ {oldest.min_driver_text} (≥ {DEFAULT.min_driver_text} for CUDA {DEFAULT.cuda})")


def driver_refusal(driver_version: str, line: CudaLine, *, how_to_choose: str) -> str | None:
    """None when the driver runs `line`; else one line naming the driver, the minimum and what fits.

    how_to_choose: how the user asks for another line, e.g. 'CUDA_LINE={name}' (formatted with the
    fitting line's name).
    """
    driver = parse_driver(driver_version)
    if driver >= line.min_driver:
        return None
    try:
        fits = line_for_driver(driver_version)
    except DriverTooOld as e:
        return str(e)
    return (f"driver {driver_version.strip()} is too old for CUDA {line.cuda} ({line.name} needs ≥ "
            f"{line.min_driver_text}): use {how_to_choose.format(name=fits.name)} (CUDA {fits.cuda}, "
            f"{fits.base_image}) or update the driver to ≥ {line.min_driver_text}")


def line_of_cuda(cuda_version: str) -> CudaLine | None:
    """The line whose CUDA major a version ('12.6', '13.0.2', torch.version.cuda) belongs to."""
    major = cuda_version.split(".")[0] if cuda_version else ""
    return next((line for line in LINES if str(line.major) == major), None)
