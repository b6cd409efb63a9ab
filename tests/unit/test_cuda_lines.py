"""suite/hardware/cuda_lines.py on real driver strings, and the Dockerfile's build arguments checked for one CUDA line.

Driver strings are the `Driver Version` lines of real `nvidia-smi -q` captures (tests/data/smi,
/work/shared/fixtures/health: sources in their READMEs) and the driver_version query's answer
on a two-GPU box (one line per GPU).
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

import pytest

from suite.hardware import cuda_lines
from suite.hardware.cuda_lines import DriverTooOld, driver_refusal, line_for_driver, line_named, parse_driver

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


@pytest.mark.parametrize("capture, version, line", [
    (DATA / "smi" / "rtx4070-laptop-q.txt", "566.36", "cu126"),
    (DATA / "smi" / "v100-pcie-q-hami-interleaved-head.txt", "535.86.10", "cu126"),
    (DATA / "smi" / "a100-sxm4-525-q-one-process.txt", "525.60.13", "cu126"),  # CUDA 12's very minimum
    (DATA / "smi" / "h200-550-q.txt", "550.90.12", "cu126"),
])
def test_lines_for_the_drivers_of_real_captures(capture, version, line):
    assert driver_of(capture) == version
    assert line_for_driver(driver_of(capture)).name == line


def test_a_2018_driver_runs_no_line_and_says_what_to_do():
    old = driver_of(DATA / "smi" / "quadro-m1000m-q-2018-head.txt")
    assert old == "375.82"
    with pytest.raises(DriverTooOld, match=r"driver 375\.82 is older than every CUDA line.*update the NVIDIA driver to ≥ 525"):
        line_for_driver(old)


@pytest.mark.parametrize("driver, line", [
    ("580.65.06", "cu130"), ("590.44.01", "cu130"), ("579.99", "cu126"), ("570.133.20\n570.133.20", "cu126"),
    ("525.60.13", "cu126"), ("550.54.15", "cu126"),
])
def test_line_boundaries(driver, line):
    assert line_for_driver(driver).name == line


@pytest.mark.parametrize("bad", ["", "N/A", "[N/A]", "nvidia-smi: not found", "550.54.15 (beta)"])
def test_unparseable_driver_is_one_clear_line(bad):
    with pytest.raises(ValueError, match="not a driver version") as e:
        parse_driver(bad)
    assert "\n" not in str(e.value)


def test_refusal_names_driver_minimum_and_the_line_that_fits():
    text = driver_refusal("550.54.15", line_named("cu130"), how_to_choose="CUDA_LINE={name}")
    assert text == ("driver 550.54.15 is too old for CUDA 13.0.2 (cu130 needs ≥ 580): use CUDA_LINE=cu126 "
                    "(CUDA 12.6.3, nvidia/cuda:12.6.3-devel-ubuntu24.04) or update the driver to ≥ 580")
    assert driver_refusal("580.65.06", line_named("cu130"), how_to_choose="CUDA_LINE={name}") is None
    assert driver_refusal("550.54.15", line_named("cu126"), how_to_choose="CUDA_LINE={name}") is None


def test_torch_pin_is_pyprojects():
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert f"torch=={cuda_lines.TORCH_VERSION}" in deps


def test_every_line_is_one_cuda_major_throughout():
    assert len(cuda_lines.LINES) >= 2 and len({line.name for line in cuda_lines.LINES}) == len(cuda_lines.LINES)
    for line in cuda_lines.LINES:
        assert coherence_problems(line.build_args()) == [], line.name
        assert line.name == f"cu{line.cuda.split('.')[0]}{line.cuda.split('.')[1]}"
    mins = [line.min_driver for line in cuda_lines.LINES]
    assert mins == sorted(mins, reverse=True)  # newest first, as line_for_driver reads them


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
    """Why BASE, TORCH_INDEX_URL, NCCL_PACKAGE and NVCC_GENCODE are not one CUDA line (empty: they are)."""
    problems = []
    base = re.fullmatch(r"nvidia/cuda:(\d+)\.(\d+)\.\d+-devel-\S+", args.get("BASE", ""))
    index = re.fullmatch(r"https://download\.pytorch\.org/whl/cu(\d\d)(\d)", args.get("TORCH_INDEX_URL", ""))
    nccl = re.fullmatch(r"nvidia-nccl-cu(\d+)", args.get("NCCL_PACKAGE", ""))
    for name, match in (("BASE", base), ("TORCH_INDEX_URL", index), ("NCCL_PACKAGE", nccl)):
        if match is None:
            problems.append(f"{name}={args.get(name)!r} names no CUDA line (PyPI's torch is whichever CUDA it is this month)")
    if problems:
        return problems
    if not base.group(1) == index.group(1) == nccl.group(1):
        problems.append(f"CUDA majors differ: base {base.group(1)}, torch {index.group(1)}, NCCL {nccl.group(1)}")
    line = cuda_lines.line_of_cuda(f"{base.group(1)}.{base.group(2)}")
    if line is None or line.build_args() != {k: args[k] for k in line.build_args()}:
        problems.append(f"not a line of suite/hardware/cuda_lines.py: {args}")
    return problems


def test_dockerfile_defaults_are_the_default_line():
    args = dockerfile_args()
    assert coherence_problems(args) == []
    assert {k: args[k] for k in cuda_lines.DEFAULT.build_args()} == cuda_lines.DEFAULT.build_args()


def test_nccl_tests_link_the_nccl_torch_ships():
    steps = instructions(ROOT / "Dockerfile")
    runs = [(i, a) for i, (w, a) in enumerate(steps) if w == "RUN"]
    (torch_at, torch_step), = [(i, a) for i, a in runs if "torch==" in a]
    (build_at, build), = [(i, a) for i, a in runs if "nccl-tests" in a and "git clone" in a]
    assert torch_at < build_at  # the NCCL wheel is there before nccl-tests is compiled
    assert '--index-url "$TORCH_INDEX_URL"' in torch_step and 'pip show "$NCCL_PACKAGE"' in torch_step
    home = re.search(r"NCCL_HOME=(\S+)", build).group(1)
    assert home == "/opt/nccl" and "ln -s \"$library\" /opt/nccl/lib/libnccl.so.2" in torch_step
    env = " ".join(a for w, a in steps if w == "ENV")
    assert "LD_LIBRARY_PATH=/opt/nccl/lib" in env  # at run time too, not the base's own libnccl
    assert "> /opt/nccl-tests/NCCL_VERSION" in build  # the manifest's nccl-tests NCCL (suite/hardware/hostprobe.py)
    assert not [a for w, a in steps if w == "RUN" and "libnccl-dev" in a]  # no second NCCL


def test_the_dockerfile_shows_each_lines_build_arguments():
    """The header's `--build-arg` lines for the other line are the table's (a typo there builds two lines)."""
    text = (ROOT / "Dockerfile").read_text()
    for line in cuda_lines.LINES:
        if line is cuda_lines.DEFAULT:
            continue
        for key, value in line.build_args().items():
            shown = f'--build-arg {key}="{value}"' if " " in value else f"--build-arg {key}={value}"
            assert shown in text, shown
