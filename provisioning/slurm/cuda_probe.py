"""make slurm on a GPU profile: the venv's CUDA line from a compute node's driver, not the login node's guess.

The login node often has no GPU and no driver, and the compute nodes' driver decides which torch build runs (a
cu130 wheel needs a driver ≥ 580). Unless CUDA_LINE= names the line, one task on one node of the partition is
asked (`srun --nodes=1 --ntasks=1 --immediate=… nvidia-smi --query-gpu=driver_version --format=csv,noheader`;
--immediate: a busy partition refuses at once rather than queueing the probe for hours) and the newest line
that driver runs is chosen (suite/hardware/cuda_lines.py). No answer, or a driver too old for every line, is
refused in one line naming the partition, what was said and the fix. A line CUDA_LINE= names is held to the
same probe's driver (chosen_line_problem): a driver too old for it is refused before the venv is built and the
job queued; a probe with no answer leaves the choice to the user (the job's GPU check still refuses before any
stage).
"""

from __future__ import annotations

import shlex

from suite.hardware.cuda_lines import (
    LINES,
    CudaLine,
    DriverTooOld,
    driver_refusal,
    line_for_driver,
    parse_driver,
)

PROBE_WAIT_S = 120  # srun --immediate: how long the probe may wait for a node before it is refused


def probe_argv(partition: str, account: str = "") -> list[str]:
    return [
        "srun",
        "--nodes=1",
        "--ntasks=1",
        f"--partition={partition}",
        *([f"--account={account}"] if account else []),
        f"--immediate={PROBE_WAIT_S}",
        "--time=5",
        "nvidia-smi",
        "--query-gpu=driver_version",
        "--format=csv,noheader",
    ]


def probe_command(partition: str, account: str = "", slurm_conf: str = "") -> str:
    """The probe as the login node's shell runs it (SLURM_CONF= exported when the cluster's is elsewhere)."""
    conf = f"export SLURM_CONF={shlex.quote(slurm_conf)}; " if slurm_conf else ""
    return conf + shlex.join(probe_argv(partition, account))


def choices() -> str:
    return " or ".join(f"CUDA_LINE={line.name} (driver ≥ {line.min_driver_text})" for line in LINES)


def probed_drivers(stdout: str) -> list[str]:
    """The probe's driver versions, the oldest first."""
    return sorted({w.strip() for w in stdout.splitlines() if w.strip()[:1].isdigit()}, key=parse_driver)


def chosen_line_problem(partition: str, line: CudaLine, exit_code: int, stdout: str) -> str | None:
    """The one-line refusal when the compute node's driver is too old for the line CUDA_LINE= chose; None when
    it runs it or the probe told no driver."""
    drivers = probed_drivers(stdout) if exit_code == 0 else []
    if not drivers:
        return None
    problem = driver_refusal(drivers[0], line, how_to_choose="CUDA_LINE={name}")
    return f"CUDA_LINE={line.name} on PARTITION={partition}'s compute node: {problem}" if problem else None


def line_from_probe(partition: str, exit_code: int, stdout: str, stderr: str) -> tuple[CudaLine | None, str]:
    """(the line the compute node's driver runs, its driver) or (None, the one-line refusal)."""
    drivers = probed_drivers(stdout)
    if exit_code != 0 or not drivers:
        said = ((stderr or stdout).strip().splitlines() or [f"exit code {exit_code}"])[-1]
        return None, (
            f"a compute node of PARTITION={partition} did not tell its NVIDIA driver "
            f"(srun nvidia-smi: {said}): pass {choices()}"
        )
    try:
        return line_for_driver(drivers[0]), drivers[0]
    except DriverTooOld as e:
        return None, f"PARTITION={partition}'s compute node: {e}"
