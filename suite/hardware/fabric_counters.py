"""NVLink and InfiniBand error counters read before and after a load, and the growth named per link and port.

    before = snapshot(ctx.raw_dir, "before")          # nvidia-smi nvlink -e
                                                      # (raw/<stage>/nvlink-e-before.txt), IB sysfs
    ...                                               # the load
    rows = growth_rows(before, snapshot(ctx.raw_dir, "after"), stage="burnin")
    fabric_verdict(rows, stage="burnin")              # fail naming every counter that grew; skip where none
                                                      # was read

IB ports are read from sysfs (/sys/class/infiniband/<device>/ports/<n>/counters/<name>: the kernel's own copy
of the port counters `perfquery` reads over MADs, present wherever the rdma modules are loaded, no tool
needed); only the error counters are compared, never the data counters that grow with any traffic.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from suite.hardware.hostprobe import run_tool
from suite.parsers import ParseError, nvlink
from suite.results import Row, Verdict
from suite.verdicts import verdicts_for

IB_ROOT = Path("/sys/class/infiniband")
IB_ERRORS = (
    "symbol_error",
    "link_error_recovery",
    "link_downed",
    "port_rcv_errors",
    "port_rcv_remote_physical_errors",
    "port_rcv_switch_relay_errors",
    "port_xmit_discards",
    "port_xmit_constraint_errors",
    "port_rcv_constraint_errors",
    "local_link_integrity_errors",
    "excessive_buffer_overrun_errors",
    "VL15_dropped",
)
"""The IBA PortCounters error fields as the kernel names them (data and packet counters are left out)."""


def read_ib(root: Path = IB_ROOT) -> dict[str, int]:
    """{'mlx5_0 port 1 symbol_error': 0, …} for every error counter the kernel exposes."""
    out = {}
    for counters in sorted(root.glob("*/ports/*/counters")):
        device, port = counters.parent.parent.parent.name, counters.parent.name
        for name in IB_ERRORS:
            try:
                out[f"{device} port {port} {name}"] = int((counters / name).read_text().strip())
            except (OSError, ValueError):
                continue
    return out


def read_nvlink(text: str) -> dict[str, int]:
    """`nvidia-smi nvlink -e` → {'GPU 3 link 5 Replay Errors': 0, …}."""
    parsed = nvlink.parse(text)
    return {
        f"GPU {g['gpu']} link {link} {name}": value
        for g in parsed["gpus"]
        for link, counters in g["counters"].items()
        for name, value in counters.items()
    }


def snapshot(raw_dir: Path, label: str, ib_root: Path = IB_ROOT) -> dict[str, int]:
    """Every NVLink and IB error counter now; the NVLink tool's output kept as raw/…/nvlink-e-<label>.txt."""
    counters = dict(read_ib(ib_root))
    if shutil.which("nvidia-smi"):
        found = run_tool(f"nvlink-e-{label}", ["nvidia-smi", "nvlink", "-e"], raw_dir, timeout_s=60)
        if found.ok:
            try:
                counters.update(read_nvlink(found.stdout))
            except ParseError:
                pass  # kept untouched under raw/; the verdict then says how many counters were read
    return counters


def growth_rows(
    before: dict[str, int], after: dict[str, int], *, stage: str, case: str = "fabric"
) -> list[Row]:
    """One row per counter read both times (value: its growth), named in `text`."""
    return [
        Row(
            stage=stage,
            case=case,
            metric="counter_growth",
            unit="count",
            value=float(after[k] - before[k]),
            text=k,
            source="nvidia-smi" if k.startswith("GPU ") else "sysfs",
        )
        for k in sorted(set(before) & set(after))
    ]


def fabric_verdict(rows: list[Row], *, stage: str, case: str = "fabric", window: str = "the load") -> Verdict:
    """`<stage>.<case>`: fail naming every counter of rows of `case` that grew across `window`."""
    v = verdicts_for(stage)
    read = [r for r in rows if r.case == case and r.metric == "counter_growth"]
    expected = f"no NVLink or IB error counter grows across {window}"
    if not read:
        return v.skip(
            case,
            expected=expected,
            observed="no NVLink or IB error counter readable on this host",
            reason="no `nvidia-smi nvlink -e` counters and no /sys/class/infiniband ports: nothing to "
            "compare",
        )
    grew = [f"{r.text} +{r.value:g}" for r in read if r.value > 0]
    return v.check(
        case,
        not grew,
        expected=expected,
        observed="; ".join(grew) if grew else f"{len(read)} counters, none grew",
        reason_ok="the links carried the load without errors",
        reason_bad="errors accrued on these links under load: a marginal cable, transceiver or port; "
        "reseat or replace it (ask the provider), then rerun `--recheck`",
    )
