"""The CUDA lines the GPU image and the host runtime can be built on, and which one a GPU and its driver run.

One table, read by the Dockerfile's build (provisioning/runtime/container_cli.py passes a line's build
arguments), the host runtime's venv (provisioning/runtime/hostruntime.py installs torch from the line's
wheel index) and preflight (provisioning/session/preflight.py: the line is chosen from the GPUs' compute
capability and the driver, both from `nvidia-smi --query-gpu=index,name,compute_cap,driver_version
--format=csv`, and a pair no line runs is refused before anything is shipped). Pure and torch-free:
it runs on the laptop.

    line_for_gpus(parse_gpu_query(text)).name   → 'cu130' for an H200 on R580, 'cu126' for a V100 on R580

A line runs a GPU when both hold:
- the driver runs the line's CUDA. NVIDIA's CUDA compatibility guide, "Minor Version Compatibility",
  table 1 (https://docs.nvidia.com/deploy/cuda-compatibility/minor-version-compatibility.html) and the
  CUDA toolkit release notes' "CUDA Toolkit and Corresponding Driver Versions" table
  (https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/index.html, table 3): CUDA 13.x needs a driver
  >= 580 (13.0 GA: >= 580.65.06), CUDA 12.x >= 525 (525.60.13; any 12.x toolkit's application runs on any
  12.x-era driver from 525 on, and on every newer driver by backward compatibility). R535 (CUDA 12.2),
  R570 (12.8) and R575 (12.9) run the 12.x line only.
- the line's torch build and nvcc have the GPU's architecture. A cubin runs on the later minors of its
  major only (CUDA C++ Programming Guide, "Binary Compatibility": sm_80's on 8.6/8.9, sm_100's on 10.3,
  sm_120's on 12.1), so a line claims a range of compute capabilities:
  - CUDA 13.0 removed offline compilation and library support for Maxwell, Pascal and Volta
    (sm_50–sm_72; CUDA 13.0 release notes, "Deprecated or Dropped Features"): its first is Turing, sm_75.
    It has Blackwell (sm_100, sm_103, sm_110, sm_120, sm_121).
  - CUDA 12.6 has sm_50–sm_90 (nvcc knows sm_100/sm_120 from 12.8 on): Volta's sm_70 and Turing's sm_75
    are there, Blackwell is not. (sm_75 stays in 13.x; the next line to drop Turing is after 13.)
- torch 2.13's CUDA builds: PyTorch's RELEASE.md compatibility matrix (pytorch/pytorch#187075):
  stable CUDA 12.6 with NCCL 2.29.3 and CUDA 13.0 with NCCL 2.29.7 (the PyPI default, whose metadata
  requires cuda-toolkit[…]==13.0.3 and nvidia-nccl-cu13==2.29.7: `pip install --dry-run --report` of
  torch==2.13.0); 12.6 builds for Maxwell to Hopper (no Blackwell), 13.0 for Turing to Blackwell.

nccl-tests' NVCC_GENCODE (`CudaLine.nvcc_gencode`) follows from the range: a cubin for the first
architecture of every major in it, plus PTX of the newest for what comes after the line.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass

TORCH_VERSION = "2.13.0"  # pyproject.toml's pin; tests/unit/test_cuda_lines.py keeps the two equal

# The first compute capability of each major that nvcc knows, newest major last: the cubins a line builds.
FIRST_OF_MAJOR = {
    5: (5, 0),
    6: (6, 0),
    7: (7, 0),
    8: (8, 0),
    9: (9, 0),
    10: (10, 0),
    11: (11, 0),
    12: (12, 0),
}


@dataclass(frozen=True)
class CudaLine:
    name: str
    """The wheel index's suffix and the name users pass: CUDA_LINE=cu126."""
    cuda: str
    """The toolkit release of the image's CUDA wheels (nvcc, cudart): '13.0.3'."""
    min_driver: tuple[int, ...]
    torch_index: str
    """pip's --index-url for torch==TORCH_VERSION of this line (the host runtime's venv)."""
    cuda_wheels: str
    """The image's CUDA toolkit wheels (pip requirements, space-separated): torch's own pins of this line."""
    nccl_package: str
    """The wheel torch ships NCCL in; nccl-tests is built against the same library."""
    nccl_version: str
    first_cc: tuple[int, int]
    """The oldest compute capability the line's torch build and nvcc have."""
    last_major: int
    """The newest major it has (every minor of it: 12 → sm_120 and sm_121)."""
    gpus: str
    """Which GPU generations its torch build has kernels for, for messages."""
    image_torch_index: str = ""
    """The Dockerfile's TORCH_INDEX_URL: empty for PyPI (its torch is the newest line's build)."""
    nsys_package: str = ""
    """Nsight Systems' package in NVIDIA's CUDA apt repository, for the line's CUDA."""

    @property
    def major(self) -> int:
        return int(self.cuda.split(".")[0])

    @property
    def min_driver_text(self) -> str:
        return ".".join(map(str, self.min_driver))

    @property
    def nccl_wheel(self) -> str:
        return f"{self.nccl_package}=={self.nccl_version}"

    def has_arch(self, cc: tuple[int, int]) -> bool:
        return self.first_cc <= cc and cc[0] <= self.last_major

    @property
    def cubins(self) -> tuple[int, ...]:
        """sm_XY numbers of the cubins nccl-tests is built with: the first of every major in the range."""
        majors = [m for m in FIRST_OF_MAJOR if self.first_cc[0] <= m <= self.last_major]
        firsts = [self.first_cc if m == self.first_cc[0] else FIRST_OF_MAJOR[m] for m in majors]
        return tuple(major * 10 + minor for major, minor in firsts)

    @property
    def nvcc_gencode(self) -> str:
        codes = [f"-gencode=arch=compute_{sm},code=sm_{sm}" for sm in self.cubins]
        ptx = self.cubins[-1]
        return " ".join(codes + [f"-gencode=arch=compute_{ptx},code=compute_{ptx}"])

    def build_args(self) -> dict[str, str]:
        """The Dockerfile's build arguments that make the image this line (see the Dockerfile's ARGs)."""
        return {
            "CUDA_LINE": self.name,
            "CUDA_WHEELS": self.cuda_wheels,
            "NCCL_WHEEL": self.nccl_wheel,
            "TORCH_INDEX_URL": self.image_torch_index,
            "NVCC_GENCODE": self.nvcc_gencode,
            "NSYS_PACKAGE": self.nsys_package,
        }


LINES: tuple[CudaLine, ...] = (  # newest first: the choice takes the first one that runs the GPU
    CudaLine(
        name="cu130",
        cuda="13.0.3",
        min_driver=(580,),
        torch_index="https://download.pytorch.org/whl/cu130",
        cuda_wheels="cuda-toolkit[nvcc,cudart,cccl,crt]==13.0.3",
        nccl_package="nvidia-nccl-cu13",
        nccl_version="2.29.7",
        first_cc=(7, 5),
        last_major=12,
        gpus="Turing to Blackwell (sm_75–sm_121)",
        nsys_package="cuda-nsight-systems-13-0",
    ),
    # torch 2.13's cu126 build pins (download.pytorch.org/whl/cu126): CUDA 12.6's runtime 12.6.77, NCCL
    # 2.29.3; nvcc 12.6.85 is Update 3's. Old-style per-component wheels (nvidia/cuda_nvcc/,
    # nvidia/cuda_runtime/, …).
    CudaLine(
        name="cu126",
        cuda="12.6.3",
        min_driver=(525,),
        torch_index="https://download.pytorch.org/whl/cu126",
        cuda_wheels="nvidia-cuda-nvcc-cu12==12.6.85 nvidia-cuda-runtime-cu12==12.6.77 "
        "nvidia-cuda-cccl-cu12==12.6.77",
        nccl_package="nvidia-nccl-cu12",
        nccl_version="2.29.3",
        first_cc=(5, 0),
        last_major=9,
        gpus="Maxwell to Hopper (sm_50–sm_90), no Blackwell",
        image_torch_index="https://download.pytorch.org/whl/cu126",
        nsys_package="cuda-nsight-systems-12-6",
    ),
)
DEFAULT = LINES[0]
"""The Dockerfile's defaults and PyPI's torch build."""


class DriverTooOld(ValueError):
    pass


def parse_driver(text: str) -> tuple[int, ...]:
    """'550.54.15' (nvidia-smi's driver_version; the first of several lines) → (550, 54, 15)."""
    first = (text or "").strip().splitlines()[0].strip() if (text or "").strip() else ""
    if not re.fullmatch(r"\d+(\.\d+){0,3}", first):
        raise ValueError(
            f"not a driver version: {text!r} (expected e.g. 550.54.15, as "
            "`nvidia-smi --query-gpu=driver_version --format=csv,noheader` prints it)"
        )
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
    raise DriverTooOld(
        f"driver {driver_version.strip()} is older than every CUDA line of torch {TORCH_VERSION} "
        f"(the oldest, CUDA {oldest.cuda}, needs ≥ {oldest.min_driver_text}): update the NVIDIA driver "
        f"to ≥ {oldest.min_driver_text} (≥ {DEFAULT.min_driver_text} for CUDA {DEFAULT.cuda})"
    )


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
    return (
        f"driver {driver_version.strip()} is too old for CUDA {line.cuda} ({line.name} needs ≥ "
        f"{line.min_driver_text}): use {how_to_choose.format(name=fits.name)} (CUDA {fits.cuda}, "
        f"torch's {fits.torch_index.rsplit('/', 1)[-1]} build) or update the driver to ≥ "
        f"{line.min_driver_text}"
    )


def line_of_cuda(cuda_version: str) -> CudaLine | None:
    """The line whose CUDA major a version ('12.6', '13.0.2', torch.version.cuda) belongs to."""
    major = cuda_version.split(".")[0] if cuda_version else ""
    return next((line for line in LINES if str(line.major) == major), None)


# ---------------------------------------------------------------- the line from the GPUs and the driver

GPU_QUERY = "nvidia-smi --query-gpu=index,name,compute_cap,driver_version --format=csv"
"""What preflight asks the host. With its header line the columns are read by name, so a capture of the
same fields in another order (tests/data/nvidia-smi-query/) parses alike. compute_cap is not a field of
the R470 drivers (huggingface/candle#733): they answer that it "is not a valid field to query"."""


@dataclass(frozen=True)
class GpuFacts:
    name: str
    compute_cap: tuple[int, int]
    driver: str

    @property
    def sm(self) -> str:
        return f"sm_{self.compute_cap[0]}{self.compute_cap[1]}"


class NoLineForGpu(ValueError):
    """No line runs this GPU on this driver; the text is the one-line refusal."""


def parse_gpu_query(text: str) -> list[GpuFacts]:
    """GPU_QUERY's answer (csv with its header; one row per GPU) → GpuFacts; ValueError in one line
    otherwise."""
    lines = [ln for ln in (text or "").strip().splitlines() if ln.strip()]
    if lines and "not a valid field" in lines[0]:
        raise ValueError(
            f"nvidia-smi answers {lines[0].strip()!r}: a driver too old for every CUDA line; "
            f"update the NVIDIA driver to ≥ {DEFAULT.min_driver_text}"
        )
    rows = list(csv.reader(io.StringIO("\n".join(lines)), skipinitialspace=True))
    header = [h.strip() for h in rows[0]] if rows else []
    if not {"name", "compute_cap", "driver_version"} <= set(header):
        raise ValueError(f"not an answer to `{GPU_QUERY}`: {(lines or ['(nothing)'])[0][:120]!r}")
    out = []
    for row in rows[1:]:
        cell = dict(zip(header, (c.strip() for c in row)))
        cap = re.fullmatch(r"(\d+)\.(\d+)", cell.get("compute_cap", ""))
        if not cap:
            raise ValueError(
                f"GPU {cell.get('name', '?')}: compute_cap {cell.get('compute_cap')!r} is not X.Y"
            )
        parse_driver(cell["driver_version"])
        out.append(GpuFacts(cell["name"], (int(cap[1]), int(cap[2])), cell["driver_version"]))
    if not out:
        raise ValueError(f"`{GPU_QUERY}` listed no GPU")
    return out


def _runs(line: CudaLine, gpu: GpuFacts) -> bool:
    return parse_driver(gpu.driver) >= line.min_driver and line.has_arch(gpu.compute_cap)


def refusal_for_gpu(gpu: GpuFacts, line: CudaLine | None = None) -> str:
    """One line: the GPU, its driver, why no line (or `line`) runs it and what to install."""
    with_arch = [candidate for candidate in LINES if candidate.has_arch(gpu.compute_cap)]
    what = f"{gpu.name} ({gpu.sm}) on driver {gpu.driver}"
    if line is not None and not line.has_arch(gpu.compute_cap):
        fit = next((c for c in with_arch if _runs(c, gpu)), None)
        return f"{what}: {line.name} (CUDA {line.cuda}) has no {gpu.sm} ({line.gpus}): " + (
            f"use CUDA_LINE={fit.name} (CUDA {fit.cuda})" if fit else "no line of torch runs this GPU"
        )
    if not with_arch:
        return (
            f"{what}: no CUDA line of torch {TORCH_VERSION} has {gpu.sm} "
            f"({'; '.join(f'{c.name}: {c.gpus}' for c in LINES)}): use a GPU of sm_{LINES[-1].cubins[0]} or "
            f"newer"
        )
    why = "; ".join(
        f"{c.name} (CUDA {c.cuda}) "
        + ("has no " + gpu.sm if not c.has_arch(gpu.compute_cap) else f"needs driver ≥ {c.min_driver_text}")
        for c in LINES
    )
    needed = min(with_arch, key=lambda c: c.min_driver)
    return (
        f"{what}: no CUDA line of torch {TORCH_VERSION} runs it ({why}): install NVIDIA driver "
        f"≥ {needed.min_driver_text} (R{needed.min_driver[0]}, CUDA {needed.major}) for {needed.name}"
    )


def line_for_gpus(gpus: list[GpuFacts]) -> CudaLine:
    """The newest line whose CUDA the driver runs and whose torch and nvcc have every GPU's architecture."""
    for line in LINES:
        if all(_runs(line, gpu) for gpu in gpus):
            return line
    stuck = [gpu for gpu in gpus if not any(_runs(line, gpu) for line in LINES)]
    if stuck:
        raise NoLineForGpu(refusal_for_gpu(stuck[0]))
    kinds = sorted({f"{gpu.name} ({gpu.sm})" for gpu in gpus})
    raise NoLineForGpu(
        f"the GPUs {', '.join(kinds)} on driver {gpus[0].driver} need different CUDA lines: "
        "run on a host whose GPUs are of one kind"
    )


def choose_line(gpu_query: str, requested: str | None = None) -> tuple[CudaLine | None, str | None]:
    """(line, None) or (None, refusal) from GPU_QUERY's answer and CUDA_LINE= (None: the newest that runs)."""
    try:
        gpus = parse_gpu_query(gpu_query)
        if not requested:
            return line_for_gpus(gpus), None
        line = line_named(requested)
    except ValueError as e:  # unparseable, unknown CUDA_LINE, or no line runs the GPUs
        return None, str(e)
    for gpu in gpus:
        if not line.has_arch(gpu.compute_cap):
            return None, refusal_for_gpu(gpu, line)
    return line, driver_refusal(gpus[0].driver, line, how_to_choose="CUDA_LINE={name}")
