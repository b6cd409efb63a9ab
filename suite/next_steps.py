"""What would decide each check a run leaves open: the capture to take and ingest, the permission to grant,
the tool to install — the step after an INCONCLUSIVE box verdict, in `suite check` and on the report's first
screen.

An ingested run is decided by capturing more on the box; a live run by what the box lacked when it ran (a
kernel log the user may not read, DCGM not installed). Steps are matched on the open id (a check, or a stage
an ingest did not capture), most specific first; checks that share a step are listed under it once.
"""

from __future__ import annotations

import re
from typing import Iterable, Mapping

SMI_Q = "`nvidia-smi -q > smi-q.txt`"
INGEST = "then `python -m suite ingest` the files (with the ones you have)"
DMESG = "`sudo dmesg -T > dmesg.txt` (or `journalctl -k -b > kern.txt`)"
NCCL_SWEEP = "nccl-tests over sizes: `all_reduce_perf -b 8 -e 8G -f 2 -g <GPUs> > all_reduce.txt`"

CAPTURE: tuple[tuple[str, str], ...] = (
    (r"health\.kernel_log", f"on the box: {DMESG}"),
    (r"health\.dcgm", "on the box: `dcgmi diag -r 1 > dcgm.txt` (DCGM installed, nv-hostengine running)"),
    (r"health\.network", "on the box: `ibstat > ibstat.txt` (or `ibv_devinfo > ibv.txt`)"),
    (r"health\.nvlink", "on the box: `nvidia-smi nvlink -s > nvlink.txt`"),
    (r"health(\..*)?$", f"on the box: {SMI_Q}, {DMESG}, `dcgmi diag -r 1 > dcgm.txt`, `ibstat > ibstat.txt`"),
    (r"topology(\..*)?$", f"on the box: `nvidia-smi topo -m > topo.txt` and {SMI_Q}"),
    (r"(bandwidth|crossover)(\..*)?$", f"on the box: {NCCL_SWEEP}"),
)
"""An ingested run: the capture that feeds each check."""

LIVE: tuple[tuple[str, str], ...] = (
    (
        r"health\.kernel_log",
        "let the run read the kernel log: allow `sudo -n dmesg` for the login user (or add it "
        f"to the adm group); or capture {DMESG} yourself and ingest it",
    ),
    (
        r"health\.dcgm",
        "install DCGM on the box (datacenter-gpu-manager matching the driver) and start "
        "nv-hostengine; or run `dcgmi diag -r 1` there yourself and ingest its output",
    ),
    (
        r"health\.network",
        "install the InfiniBand tools (`ibstat`, infiniband-diags) on the box, or capture "
        "`ibstat` there and ingest it",
    ),
    (
        r".*\.peak.*|.*\.sku|.*\.mfu.*",
        "the GPU model has no datasheet figure in suite/hardware/gpus.py: add it "
        "(with its source) and rerun the report",
    ),
)
"""A live run: what the box (or the table) lacked."""

AFTER_REHEARSAL = (
    "the code is proven on CPU; price a rental with `make plan TIER=quick RATE=<$/hour>`, then test the "
    "box with `make remote HOST=user@host TIER=quick`"
)
"""What follows a clean rehearsal (its numbers judge the code, never a box)."""
STOPPED = "resume the run where it stopped: `python -m suite run --resume RUN_DIR`"
DEFAULT = "read the check's reason in the report; rerun its stage with `python -m suite run --resume RUN_DIR`"


def step(open_id: str, why: str, *, ingested: bool) -> str:
    """The action that would decide the open check `open_id`."""
    if "did not run to the end" in why:
        return STOPPED
    for pattern, action in CAPTURE if ingested else LIVE:
        if re.fullmatch(pattern, open_id):
            return f"{action}; {INGEST}" if ingested else action
    return DEFAULT


def grouped(opened: Iterable, manifest: Mapping) -> list[tuple[str, list[str]]]:
    """[(action, [open ids it decides])], in the order the open checks are listed."""
    ingested = isinstance(manifest.get("ingested"), dict)
    out: dict[str, list[str]] = {}
    for o in opened:
        out.setdefault(step(o.id, o.why, ingested=ingested), []).append(o.id)
    return list(out.items())


def lines(opened: Iterable, manifest: Mapping, bullet: str, shown: int | None = None) -> list[str]:
    """One printed line per step: `bullet`, the action, the open ids it decides (the first `shown`, the rest
    counted)."""
    out = []
    for action, ids in grouped(opened, manifest):
        named = ", ".join(ids[:shown]) + (
            f" and {len(ids) - shown} more" if shown and len(ids) > shown else ""
        )
        out.append(f"{bullet}{action} ({named})")
    return out
