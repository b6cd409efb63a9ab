"""suite/hardware/cuda_lines.py on real driver strings and GPU queries, the GPU/driver pairs an expert knows
the answer for, and the Dockerfile's build arguments checked for one CUDA line.

Driver strings are the `Driver Version` lines of real `nvidia-smi -q` captures (tests/data/smi,
/work/shared/fixtures/health: sources in their READMEs) and the driver_version query's answer
on a two-GPU box (one line per GPU); the compute_cap query is tests/data/nvidia-smi-query's capture.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
import tomllib

from suite.hardware import cuda_lines
from suite.hardware.cuda_lines import (
    DriverTooOld,
    GpuFacts,
    NoLineForGpu,
    choose_line,
    driver_refusal,
    line_for_driver,
    line_for_gpus,
    line_named,
    parse_driver,
    parse_gpu_query,
)

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_container_image import instructions  # noqa: E402


def driver_of(capture: Path) -> str:
    """The `Driver Version : 535.129.03` line of an `nvidia-smi -q` capture."""
    for line in capture.read_text().splitlines():
        if line.strip().startswith("Driver Version"):
            return line.split(":", 1)[1].strip()
    raise AssertionError(f"{capture} has no Driver Version line")


@pytest.mark.parametrize(
    "capture, version, line",
    [
        (DATA / "smi" / "rtx4070-laptop-q.txt", "566.36", "cu126"),
        (DATA / "smi" / "v100-pcie-q-hami-interleaved-head.txt", "535.86.10", "cu126"),
        (DATA / "smi" / "a100-sxm4-525-q-one-process.txt", "525.60.13", "cu126"),  # CUDA 12's very minimum
        (DATA / "smi" / "h200-550-q.txt", "550.90.12", "cu126"),
    ],
)
def test_lines_for_the_drivers_of_real_captures(capture, version, line):
    assert driver_of(capture) == version
    assert line_for_driver(driver_of(capture)).name == line


def test_a_2018_driver_runs_no_line_and_says_what_to_do():
    old = driver_of(DATA / "smi" / "quadro-m1000m-q-2018-head.txt")
    assert old == "375.82"
    with pytest.raises(
        DriverTooOld, match=r"driver 375\.82 is older than every CUDA line.*update the NVIDIA driver to ≥ 525"
    ):
        line_for_driver(old)


@pytest.mark.parametrize(
    "driver, line",
    [
        ("580.65.06", "cu130"),
        ("590.44.01", "cu130"),
        ("579.99", "cu126"),
        ("570.133.20\n570.133.20", "cu126"),
        ("525.60.13", "cu126"),
        ("550.54.15", "cu126"),
    ],
)
def test_line_boundaries(driver, line):
    assert line_for_driver(driver).name == line


@pytest.mark.parametrize("bad", ["", "N/A", "[N/A]", "nvidia-smi: not found", "550.54.15 (beta)"])
def test_unparseable_driver_is_one_clear_line(bad):
    with pytest.raises(ValueError, match="not a driver version") as e:
        parse_driver(bad)
    assert "\n" not in str(e.value)


def test_refusal_names_driver_minimum_and_the_line_that_fits():
    text = driver_refusal("550.54.15", line_named("cu130"), how_to_choose="CUDA_LINE={name}")
    assert text == (
        "driver 550.54.15 is too old for CUDA 13.0.3 (cu130 needs ≥ 580): use CUDA_LINE=cu126 "
        "(CUDA 12.6.3, torch's cu126 build) or update the driver to ≥ 580"
    )
    assert driver_refusal("580.65.06", line_named("cu130"), how_to_choose="CUDA_LINE={name}") is None
    assert driver_refusal("550.54.15", line_named("cu126"), how_to_choose="CUDA_LINE={name}") is None


def test_torch_pin_is_pyprojects():
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert f"torch=={cuda_lines.TORCH_VERSION}" in deps


# ---------------------------------------------------------------- the line from the GPU and the driver
# Compute capabilities: NVIDIA's "CUDA GPUs" table (developer.nvidia.com/cuda-gpus): V100 7.0, H100/H200 9.0,
# B200 10.0, RTX 5090 12.0. Drivers: NVIDIA's CUDA toolkit/driver table (the release notes' table 3) — R535 is
# CUDA 12.2's, R570 12.8's, R575 12.9's, R580 13.0's. CUDA 13.0 dropped sm_50–sm_72 (Maxwell, Pascal, Volta:
# the 13.0 release notes); sm_75 (Turing) is in both lines; CUDA 12.6 has no Blackwell (sm_100 from 12.8 on).


def gpu(name: str, cc: tuple[int, int], driver: str) -> GpuFacts:
    return GpuFacts(name, cc, driver)


@pytest.mark.parametrize(
    "name, cc, driver, expected",
    [
        # Volta on R580: the driver runs CUDA 13, but 13.0 has no sm_70: the 12.6 line (R580 runs it by
        # backward compatibility), not cu130, whose every kernel would fail with "no kernel image".
        ("Tesla V100-SXM2-32GB", (7, 0), "580.65.06", "cu126"),
        # Hopper on R535 (CUDA 12.2): CUDA 12.6 runs there by minor version compatibility (≥ 525), with sm_90
        # cubins.
        ("NVIDIA H100 80GB HBM3", (9, 0), "535.129.03", "cu126"),
        # Hopper on R580: the newest line.
        ("NVIDIA H200", (9, 0), "580.82.07", "cu130"),
    ],
)
def test_the_line_an_expert_gives_for_each_gpu_and_driver(name, cc, driver, expected):
    assert line_for_gpus([gpu(name, cc, driver)] * 8).name == expected


@pytest.mark.parametrize(
    "name, cc, driver, sm",
    [
        # Blackwell on R570 (CUDA 12.8) or R575 (12.9): torch 2.13's CUDA 12 build is 12.6, which has no
        # sm_100 / sm_120, and its CUDA 13 build needs R580. What to install is the R580 driver, not another
        # image.
        ("NVIDIA B200", (10, 0), "570.133.20", "sm_100"),
        ("NVIDIA GeForce RTX 5090", (12, 0), "575.57.08", "sm_120"),
    ],
)
def test_blackwell_on_a_cuda_12_driver_is_refused_naming_gpu_driver_and_what_to_install(name, cc, driver, sm):
    with pytest.raises(NoLineForGpu) as e:
        line_for_gpus([gpu(name, cc, driver)])
    text = str(e.value)
    assert "\n" not in text
    assert text.startswith(f"{name} ({sm}) on driver {driver}: no CUDA line of torch 2.13.0 runs it")
    assert f"cu130 (CUDA 13.0.3) needs driver ≥ 580; cu126 (CUDA 12.6.3) has no {sm}" in text
    assert text.endswith("install NVIDIA driver ≥ 580 (R580, CUDA 13) for cu130")


def test_a_gpu_older_than_every_line_says_no_driver_helps():
    with pytest.raises(
        NoLineForGpu,
        match=r"Tesla K80 \(sm_37\) on driver 580.65.06: no CUDA line of torch 2.13.0 "
        r"has sm_37 .*use a GPU of sm_50 or newer",
    ):
        line_for_gpus([gpu("Tesla K80", (3, 7), "580.65.06")])


def test_gpus_needing_different_lines_are_refused():
    with pytest.raises(NoLineForGpu, match="need different CUDA lines"):
        line_for_gpus([gpu("Tesla V100", (7, 0), "580.65.06"), gpu("NVIDIA B200", (10, 0), "580.65.06")])


def test_a_requested_line_without_the_gpus_architecture_is_refused_with_the_one_that_fits():
    query = "index, name, compute_cap, driver_version\n0, Tesla V100-SXM2-32GB, 7.0, 580.65.06\n"
    line, problem = choose_line(query, "cu130")
    assert line is None and problem == (
        "Tesla V100-SXM2-32GB (sm_70) on driver 580.65.06: cu130 (CUDA 13.0.3) has no "
        "sm_70 (Turing to Blackwell (sm_75–sm_121)): use CUDA_LINE=cu126 (CUDA 12.6.3)"
    )
    assert choose_line(query, None)[0].name == "cu126"
    assert choose_line(query, "cu126") == (line_named("cu126"), None)


def test_the_captured_query_parses_by_its_header():
    rows = parse_gpu_query((DATA / "nvidia-smi-query" / "titanv-rtx5880ada-570-query.csv").read_text())
    assert rows == [
        GpuFacts("NVIDIA TITAN V", (7, 0), "570.86.15"),
        GpuFacts("NVIDIA RTX 5880 Ada Generation", (8, 9), "570.86.15"),
    ]
    assert line_for_gpus(rows).name == "cu126"  # R570: CUDA 12 only; Volta and Ada both in 12.6


@pytest.mark.parametrize(
    "bad, says",
    [
        ('Field "compute_cap" is not a valid field to query.', "too old for every CUDA line"),
        ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.", "not an answer"),
        ("index, name, compute_cap, driver_version\n", "listed no GPU"),
        ("index, name, compute_cap, driver_version\n0, NVIDIA H100, [N/A], 580.65.06\n", "is not X.Y"),
    ],
)
def test_unusable_query_answers_are_one_clear_line(bad, says):
    line, problem = choose_line(bad)
    assert line is None and says in problem and "\n" not in problem


def test_every_line_is_one_cuda_major_throughout():
    assert len(cuda_lines.LINES) >= 2 and len({line.name for line in cuda_lines.LINES}) == len(
        cuda_lines.LINES
    )
    for line in cuda_lines.LINES:
        assert coherence_problems(line.build_args()) == [], line.name
        assert line.name == f"cu{line.cuda.split('.')[0]}{line.cuda.split('.')[1]}"
    mins = [line.min_driver for line in cuda_lines.LINES]
    assert mins == sorted(mins, reverse=True)  # newest first, as the choice reads them


@pytest.mark.parametrize(
    "name, cubins", [("cu130", (75, 80, 90, 100, 110, 120)), ("cu126", (50, 60, 70, 80, 90))]
)
def test_nccl_tests_gencode_covers_every_architecture_the_line_claims(name, cubins):
    """Every compute capability of the line's range runs one of the cubins: one of its major, at or below
    it."""
    line = line_named(name)
    assert line.cubins == cubins
    claimed = [
        (major, minor) for major in range(3, 13) for minor in range(10) if line.has_arch((major, minor))
    ]
    for cc in claimed:
        assert any(sm // 10 == cc[0] and sm % 10 <= cc[1] for sm in line.cubins), cc
    codes = re.findall(r"arch=compute_(\d+),code=(sm|compute)_(\d+)", line.nvcc_gencode)
    assert {int(a) for a, kind, _ in codes if kind == "sm"} == set(cubins)
    # PTX: what's next
    assert [(int(a), kind) for a, kind, _ in codes if kind == "compute"] == [(cubins[-1], "compute")]


# ---------------------------------------------------------------- the Dockerfile


def dockerfile_args() -> dict[str, str]:
    """ARG defaults of the Dockerfile, quotes removed."""
    out = {}
    for word, rest in instructions(ROOT / "Dockerfile"):
        if word == "ARG" and "=" in rest:
            key, value = rest.split("=", 1)
            out[key] = value.strip('"')
    return out


def coherence_problems(args: dict[str, str]) -> list[str]:
    """Why CUDA_LINE, CUDA_WHEELS, NCCL_WHEEL and NVCC_GENCODE are not one CUDA line (empty: they are)."""
    problems = []
    line = re.fullmatch(r"cu(\d\d)(\d)", args.get("CUDA_LINE", ""))
    nvcc = re.search(
        r"(?:cuda-toolkit\[[^]]*\]|nvidia-cuda-nvcc-cu\d+)==(\d+)\.(\d+)", args.get("CUDA_WHEELS", "")
    )
    nccl = re.fullmatch(r"nvidia-nccl-cu(\d+)==[\d.]+", args.get("NCCL_WHEEL", ""))
    for name, match in (("CUDA_LINE", line), ("CUDA_WHEELS", nvcc), ("NCCL_WHEEL", nccl)):
        if match is None:
            problems.append(f"{name}={args.get(name)!r} names no CUDA line")
    if problems:
        return problems
    if not line.group(1) == nvcc.group(1) == nccl.group(1):
        problems.append(
            f"CUDA majors differ: line {line.group(1)}, nvcc {nvcc.group(1)}, NCCL {nccl.group(1)}"
        )
    table = cuda_lines.line_of_cuda(f"{nvcc.group(1)}.{nvcc.group(2)}")
    if table is None or table.build_args() != {k: args.get(k) for k in table.build_args()}:
        problems.append(f"not a line of suite/hardware/cuda_lines.py: {args}")
    return problems


def test_dockerfile_defaults_are_the_default_line():
    args = dockerfile_args()
    args.setdefault("TORCH_INDEX_URL", "")
    assert coherence_problems(args) == []
    assert {k: args[k] for k in cuda_lines.DEFAULT.build_args()} == cuda_lines.DEFAULT.build_args()


def test_the_default_line_is_torch_2_13s_own_pins():
    """torch 2.13.0's CUDA build requires these two (its own Requires-Dist, tests/data/torch-metadata): the
    image installs exactly them, so torch finds its CUDA already there and nccl-tests links the NCCL torch
    loads."""
    capture = DATA / "torch-metadata" / "torch-2.13.0-cp311-manylinux_2_28_x86_64-requires-dist.txt"
    pins = {}
    for line in capture.read_text().splitlines():
        requirement = line.split(";")[0].strip()
        name = re.split(r"[\[=<>]", requirement)[0]
        if "==" in requirement:
            pins[name] = requirement.split("==")[1]
    default = cuda_lines.DEFAULT
    assert default.nccl_wheel == f"nvidia-nccl-cu13=={pins['nvidia-nccl-cu13']}" == "nvidia-nccl-cu13==2.29.7"
    assert default.cuda_wheels == f"cuda-toolkit[nvcc,cudart,cccl,crt]=={pins['cuda-toolkit']}"
    assert default.cuda == pins["cuda-toolkit"] == "13.0.3"
