"""Across nodes: did NCCL use the fabric the nodes have? From NCCL's own debug lines
(suite/stages/_nccl_net.py's rows) and the RDMA ports topology found up on each node (facts['node_rdma']:
suite/cluster/node_nics.py).

A sockets fallback can reach 70 % of an Ethernet ceiling and pass the floor (NVIDIA/nccl#1676: GDR off after
an OS upgrade, all_reduce 180 → 10 GB/s), so the transport is judged on its own:

    bandwidth.inter_transport   fail: sockets while a node has RDMA ports up; pass: RDMA (IB, RoCE, a net
                                plugin such as EFA's), or sockets where no node has an RDMA port
    bandwidth.inter_gdr         fail: no network channel over GPUDirect RDMA on an RDMA transport; warn: some
"""

from __future__ import annotations

import math
from typing import Sequence

from suite.results import Row, Verdict
from suite.stages._nccl_net import CASE, GDR, METRIC, sockets_reason
from suite.verdicts import verdicts_for

V = verdicts_for("bandwidth")
DEBUG = "NCCL_DEBUG=INFO with NCCL_DEBUG_SUBSYS=INIT,NET (the sweep across nodes sets both)"


def rdma_text(rdma: dict[str, list[str]]) -> str:
    return "; ".join(f"node {n}: {', '.join(p[:4])}" for n, p in sorted(rdma.items()))


def judge_transport(rows: Sequence[Row], facts: dict) -> list[Verdict]:
    transport = [r for r in rows if r.case == CASE and r.metric == METRIC]
    rdma = {n: ports for n, ports in (facts.get("node_rdma") or {}).items() if ports}
    expected = "RDMA (IB, RoCE, EFA) across nodes that have RDMA ports"
    if not transport:
        return [
            V.skip(
                "inter_transport",
                expected=expected,
                observed="no NCCL network line in the sweep's debug files",
                reason=f"NCCL's choice of network was not logged: {DEBUG}",
            )
        ]
    sockets = sockets_reason(transport)
    if not sockets:
        used = transport[0].text
        return [V.passed("inter_transport", expected=expected, observed=used, reason="NCCL used RDMA")]
    if rdma:
        return [
            V.fail(
                "inter_transport",
                expected=expected,
                observed=f"{sockets}; RDMA ports up on {rdma_text(rdma)}",
                reason="NCCL fell back to TCP sockets on nodes with RDMA ports: the fabric paid for carried "
                "nothing. Check /dev/infiniband in the container, NCCL_IB_DISABLE/NCCL_NET, the ibverbs "
                "provider (rdma-core) and, for EFA, aws-ofi-nccl",
            )
        ]
    if "node_rdma" in facts:
        return [
            V.passed(
                "inter_transport",
                expected=expected,
                observed=f"{sockets}; no node has an RDMA port up",
                reason="Ethernet-only nodes: TCP sockets are the network NCCL has",
            )
        ]
    return [
        V.warn(
            "inter_transport",
            expected=expected,
            observed=sockets,
            reason="NCCL used TCP sockets and the nodes' RDMA ports were not read (topology did not run): "
            "check `ibstat` on each node",
        )
    ]


def judge_gdr(rows: Sequence[Row], facts: dict) -> list[Verdict]:
    """GPUDirect RDMA on the network channels of an RDMA transport; nothing to judge over sockets."""
    transport = [r for r in rows if r.case == CASE and r.metric == METRIC]
    if not transport or sockets_reason(transport):
        return []
    gdr = [r for r in rows if r.case == CASE and r.metric == GDR]
    expected = "every network channel over GPUDirect RDMA (`via NET/…/GDRDMA`)"
    known = [r for r in gdr if math.isfinite(r.value)]
    if not known:
        return [
            V.skip(
                "inter_gdr",
                expected=expected,
                observed=gdr[0].text if gdr else "no GPUDirect RDMA line",
                reason=f"NCCL logged no channel over the network: {DEBUG}",
            )
        ]
    worst = min(known, key=lambda r: r.value)  # of the sweep's binaries
    share, observed = worst.value, worst.text
    if share == 1:
        return [
            V.passed("inter_gdr", expected=expected, observed=observed, reason="the NICs read GPU memory")
        ]
    why = (
        "GPUDirect RDMA off: every byte crosses host memory (nvidia-peermem or dma-buf missing, "
        "NCCL_NET_GDR_LEVEL, or the ACS/IOMMU settings of the host)"
    )
    if share == 0:
        return [V.fail("inter_gdr", expected=expected, observed=observed, reason=why)]
    return [V.warn("inter_gdr", expected=expected, observed=observed, reason=f"on some channels only: {why}")]


def judge(rows: Sequence[Row], facts: dict) -> list[Verdict]:
    return judge_transport(rows, facts) + judge_gdr(rows, facts)
