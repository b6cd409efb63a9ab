"""Across nodes, which network NCCL took (suite/parsers/nccl_net.py), recorded as a row and told in the
verdicts.

nccl-tests across nodes runs with NCCL_DEBUG=INFO (subsystems INIT,NET) written to files of their own
(NCCL_DEBUG_FILE=raw/<stage>/<binary>.nccl-debug.<host>.<pid>), so its output stays what the nccl-tests parser
reads; the first node's files are read after the run. Rows of case `nccl_net`: metric `transport`, value 1
for RDMA (IB, RoCE, a net plugin), 0 for sockets, text the transport or "NCCL used sockets: …"; metric `gdr`,
the share of network channels over GPUDirect RDMA (NaN where no channel line was logged). An inter-node floor
missed over sockets then says so instead of blaming the fabric, and sockets or GPUDirect RDMA off on nodes
with RDMA ports fails `bandwidth.inter_transport` (suite/stages/bandwidth/transport_judge.py).
"""

from __future__ import annotations

from pathlib import Path

from suite.parsers.nccl_net import parse_nccl_net
from suite.results import Row

CASE, METRIC, GDR = "nccl_net", "transport", "gdr"


def debug_env(raw_dir: Path, program: str) -> dict[str, str]:
    return {
        "NCCL_DEBUG": "INFO",
        "NCCL_DEBUG_SUBSYS": "INIT,NET",
        "NCCL_DEBUG_FILE": str(raw_dir / f"{program}.nccl-debug.%h.%p"),
    }


def transport_rows(stage: str, raw_dir: Path, program: str) -> list[Row]:
    """The rows from the debug files one binary left; none when they say nothing about the network."""
    text = "".join(p.read_text(errors="replace") for p in sorted(raw_dir.glob(f"{program}.nccl-debug.*")))
    net = parse_nccl_net(text)
    if net.transport is None:
        return []
    gdr = Row(
        stage=stage,
        case=CASE,
        metric=GDR,
        value=net.gdr_channels / net.net_channels if net.net_channels else float("nan"),
        unit="share",
        source="nccl-tests",
        text=net.gdr_text(),
    )
    return [transport_row(stage, net), gdr]


def transport_row(stage: str, net) -> Row:
    """The `transport` row of a parsed log (suite/parsers/nccl_net.py's NcclNet)."""
    return Row(
        stage=stage,
        case=CASE,
        metric=METRIC,
        value=0.0 if net.sockets else 1.0,
        unit="count",
        source="nccl-tests",
        text=net.why_sockets()
        or f"NCCL used {net.transport}: {', '.join(net.ib_devices[:4]) or 'its net plugin'}",
    )


def sockets_reason(rows) -> str:
    """'NCCL used sockets: …' from the run's transport rows, or ''."""
    return next(
        (r.text for r in rows if r.case == CASE and r.metric == METRIC and r.value == 0.0 and r.text), ""
    )
