"""The burn-in's memory and host-link phase: HBM copy bandwidth per GPU, host↔device per GPU alone and all at
once.

    rows = links_phase(w, hbm_bytes=1 << 30, copy_bytes=256 << 20, iters=10)

HBM: a device-to-device copy of `hbm_bytes` (1 GiB on GPUs: twenty times an H100's 50 MB L2, so the copy
streams from HBM, not the cache), reported as bytes read + bytes written per second (2 × size / time: what the
memory moved). Host links: pinned host buffers copied to and from the device, first one GPU at a time (each
GPU's own link, as nvbandwidth's per-GPU matrix measures it), then every GPU at once (the host's shared PCIe
root complexes and memory: a GPU that collapses only here shares a switch or a NUMA node badly). Timed as the
health stage times its copies (suite/workloads/health_run.py: CUDA events on GPUs, the wall clock on CPU
ranks, where the numbers mean nothing and the rows and the rule are real).
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from suite.results import Row
from suite.workloads.health_run import _timed as timed
from suite.workloads.health_run import copy_GBps

STAGE = "burnin"


def hbm_GBps(device: torch.device, nbytes: int, iters: int) -> float:
    """Bytes read + written per second by a device-to-device copy (the health stage's timing: its median
    windows)."""
    src = torch.empty(nbytes, dtype=torch.uint8, device=device).fill_(1)
    dst = torch.empty_like(src)
    return 2 * nbytes * iters / timed(lambda: dst.copy_(src), device, iters) / 1e9


def host_GBps(device: torch.device, nbytes: int, iters: int) -> tuple[float, float]:
    """(host→device, device→host) GB/s through a pinned host buffer (the health stage's measurement)."""
    return copy_GBps(device, nbytes, iters, 1)


def links_phase(w, *, hbm_bytes: int, copy_bytes: int, iters: int) -> list[Row]:
    """This rank's HBM and host-link rows; every rank enters every barrier (the turns are collective)."""
    base = dict(stage=STAGE, rank=w.rank, world=w.world, source="torch", unit="GB/s")
    alone = (0.0, 0.0)
    for turn in range(w.world):  # one GPU at a time: each link measured without its neighbours' traffic
        dist.barrier()
        if turn == w.rank:
            w.progress(f"host links one GPU at a time: {turn + 1} of {w.world}")
            alone = host_GBps(w.device, copy_bytes, iters)
    dist.barrier()
    w.progress("host links, every GPU at once")
    together = host_GBps(w.device, copy_bytes, iters)
    dist.barrier()
    w.progress("HBM copy per GPU")
    hbm = hbm_GBps(w.device, hbm_bytes, iters)
    return [
        Row(**base, case="hbm", metric="copy_GBps", value=hbm, size_bytes=hbm_bytes),
        Row(**base, case="host_alone", metric="h2d_GBps", value=alone[0], size_bytes=copy_bytes),
        Row(**base, case="host_alone", metric="d2h_GBps", value=alone[1], size_bytes=copy_bytes),
        Row(**base, case="host_all", metric="h2d_GBps", value=together[0], size_bytes=copy_bytes),
        Row(**base, case="host_all", metric="d2h_GBps", value=together[1], size_bytes=copy_bytes),
    ]
