"""Pure checks of a GPU host that make NCCL fail before any measurement: /dev/shm too small, an
NVSwitch fabric not up, other processes on the GPUs. Each returns None or one line with the fix.

Shared by preflight (provisioning/session/preflight.py, on the probe's outputs) and the health stage,
which can run the same tools on the node and call the same functions.
"""

from __future__ import annotations

from suite.parsers.smi_health import gpu_processes
from suite.parsers.smi_query import parse_query

MIN_SHM_BYTES = 1 << 30
"""NCCL's shared-memory transport maps buffers per peer pair in /dev/shm; Docker's and many pods' 64 MB
default ends in "Error while creating shared memory segment" with several GPUs (NCCL's troubleshooting
guide suggests --shm-size=1g or --ipc=host)."""


def shm_problem(shm_bytes: int | None, gpus: int) -> str | None:
    if shm_bytes is None or gpus < 2 or shm_bytes >= MIN_SHM_BYTES:
        return None
    return (
        f"/dev/shm is {shm_bytes / 2**20:.0f} MiB, NCCL needs ≥ {MIN_SHM_BYTES >> 20} MiB for {gpus} GPUs "
        '("Error while creating shared memory segment"): start the box/container with --shm-size=16g or '
        "--ipc=host"
    )


def fabric_problem(smi_q: str, fabric_manager: str = "") -> str | None:
    """GPUs that report a fabric (NVSwitch boards) must say State Completed, Status Success."""
    if not smi_q.strip():
        return None
    try:
        gpus = parse_query(smi_q)["gpus"]
    except Exception:  # noqa: BLE001 - an unreadable -q is the topology stage's finding, not preflight's
        return None
    return fabric_problem_from_gpus(gpus, fabric_manager)


def fabric_problem_from_gpus(gpus: list[dict], fabric_manager: str = "") -> str | None:
    """The same rule on parsed GPUs (dicts with fabric_state / fabric_status), as the health stage holds
    them."""
    bad = [
        (i, g.get("fabric_state"), g.get("fabric_status"))
        for i, g in enumerate(gpus)
        if g.get("fabric_state")
        and (g.get("fabric_state") != "Completed" or (g.get("fabric_status") or "Success") != "Success")
    ]
    if not bad:
        return None
    i, state, status = bad[0]
    fm = f" (nvidia-fabricmanager: {fabric_manager.strip()})" if fabric_manager.strip() else ""
    return (
        f"the NVSwitch fabric is not up on {len(bad)} GPU(s) (GPU {i}: state {state}, status {status}){fm}, "
        "CUDA init would fail with error 802: `systemctl restart nvidia-fabricmanager` (same version as the "
        "driver) and wait for State Completed in `nvidia-smi -q`"
    )


def processes_problem(smi_q: str) -> str | None:
    """Compute processes (type C or C+G) already on the GPUs: they take memory and skew every timing."""
    return processes_problem_from_list(gpu_processes(smi_q))


def processes_problem_from_list(
    processes: list[dict[str, str]], mine: frozenset[str] = frozenset()
) -> str | None:
    """The same rule on parsed processes; `mine` are this run's own pids (not another tenant's)."""
    compute = [p for p in processes if "C" in p.get("type", "C") and p.get("pid") not in mine]
    if not compute:
        return None
    shown = ", ".join(
        f"pid {p['pid']} {p.get('name', '?')} ({p.get('memory', '?')}) on GPU {p['gpu']}" for p in compute[:3]
    )
    more = f" and {len(compute) - 3} more" if len(compute) > 3 else ""
    return (
        f"{len(compute)} process(es) already use the GPUs: {shown}{more}: stop them (kill PID) before "
        f"measuring"
    )
