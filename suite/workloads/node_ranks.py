"""Which node each rank of a launch runs on, as rows: dp and zero record it for every degree on a multi-node
run.

    names = node_names(w.world)                     # ['node-a', 'node-a', 'node-b', 'node-b'] by rank
    w.emit(nodes_rows(names, [1, 2, 4], "dp"))      # 4 ranks: nodes_spanned 2, text 'node-a,node-b'

Found, not assumed: the launcher numbers ranks node by node (torchrun: node g's ranks are g·nproc …), and
these rows are how the stage checks it (suite/stages/_across_nodes.py nodes_verdict).
"""

from __future__ import annotations

import os
import socket

from suite.results import Row

NODES_METRIC = "nodes_spanned"


def node_names(world: int) -> list[str]:
    """Each rank's node, by rank (a collective: every rank calls it): the launcher's name for its node
    (CARDTIME_NODE_NAME, suite/cluster/multilaunch.py), else the host's name."""
    import torch.distributed as dist

    names: list[str | None] = [None] * world
    dist.all_gather_object(names, os.environ.get("CARDTIME_NODE_NAME") or socket.gethostname())
    return [str(n) for n in names]


def nodes_rows(names: list[str], degrees, stage: str, **params) -> list[Row]:
    """One row per degree: how many nodes ranks 0…d−1 ran on (names: each rank's node, by rank), and which."""
    out = []
    for d in degrees:
        seen = list(dict.fromkeys(names[:d]))
        out.append(
            Row(
                stage=stage,
                case="train_step",
                metric=NODES_METRIC,
                value=len(seen),
                unit="nodes",
                world=d,
                text=",".join(seen),
                source="torch",
                **params,
            )
        )
    return out
