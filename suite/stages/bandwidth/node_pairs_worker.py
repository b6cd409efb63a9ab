"""The inter-node point-to-point matrix: send/recv between every ordered pair of nodes, one pair at a time.

    ctx.torchrun("suite.stages.bandwidth.node_pairs_worker", ["--bytes", "4194304", "--iters", "5"],
    tag="pairs")

Each node's first rank (LOCAL_RANK 0) speaks for its node; the pairs run one after another (every rank
waits at a barrier between them) so a pair has the link to itself and a slow node or link shows in its
own row. The receiver checks every element against the pattern the sender filled (sender index × 8 +
(i mod 8): small integers, exact in any dtype) and times `iters` blocking transfers after one warm-up.

Rows (source "p2p", case "<from>→<to>" with the node names the launcher gave, CARDTIME_NODE_NAME):
`busbw` in GB/s (bytes / mean transfer time; one link, so bus and algorithm bandwidth agree), `time_us`,
and `wrong` (elements that differ). Written by the receiving node's first rank.
"""

from __future__ import annotations

import argparse
import os
import time

import torch
import torch.distributed as dist

from suite.cluster.multinode import arrow
from suite.results import Row
from suite.workloads.worker import Worker, worker_session

STAGE = "bandwidth"


def node_leaders(w: Worker) -> list[tuple[str, int]]:
    """(node name, global rank of its LOCAL_RANK 0) for every node, in node-rank order."""
    me = (
        int(os.environ.get("GROUP_RANK", "0")),
        w.local_rank,
        os.environ.get("CARDTIME_NODE_NAME", "node"),
        w.rank,
    )
    everyone: list = [None] * w.world
    dist.all_gather_object(everyone, me)
    return [(name, rank) for _, local, name, rank in sorted(everyone) if local == 0]


def filled(count: int, sender_index: int, device: torch.device) -> torch.Tensor:
    return (torch.arange(count, device=device) % 8 + sender_index * 8).to(torch.float32)


def measure_pair(w: Worker, leaders, i: int, j: int, count: int, iters: int) -> list[Row]:
    (src_name, src), (dst_name, dst) = leaders[i], leaders[j]
    rows: list[Row] = []
    if w.rank == src:
        data = filled(count, i, w.device)
        for _ in range(1 + iters):
            dist.send(data, dst)
    elif w.rank == dst:
        buf = torch.empty(count, dtype=torch.float32, device=w.device)
        dist.recv(buf, src)
        wrong = int((buf != filled(count, i, w.device)).sum().item())
        w.synchronize()
        t0 = time.perf_counter()
        for _ in range(iters):
            dist.recv(buf, src)
        w.synchronize()
        seconds = (time.perf_counter() - t0) / iters
        nbytes = count * 4
        common = dict(
            stage=STAGE,
            case=arrow(src_name, dst_name),
            source="p2p",
            size_bytes=nbytes,
            world=2,
            rank=w.rank,
            dtype="float32",
        )
        rows = [
            Row(metric="busbw", value=nbytes / seconds / 1e9, unit="GB/s", **common),
            Row(metric="time_us", value=seconds * 1e6, unit="us", **common),
            Row(metric="wrong", value=float(wrong), unit="count", **common),
        ]
    dist.barrier()
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bytes", type=int, default=4 << 20, help="bytes per transfer (default 4 MiB)")
    p.add_argument("--iters", type=int, default=5, help="timed transfers per pair (after one warm-up)")
    args = p.parse_args()
    with worker_session() as w:
        leaders = node_leaders(w)
        count = max(1, args.bytes // 4)
        rows: list[Row] = []
        for i in range(len(leaders)):
            for j in range(len(leaders)):
                if i != j:
                    rows += measure_pair(w, leaders, i, j, count, args.iters)
        w.emit(rows)


if __name__ == "__main__":
    main()
