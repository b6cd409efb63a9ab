"""Every node's NICs for the topology stage of a multi-node run (suite/stages/_node_nics.py judges them).

    ctx.torchrun("suite.workloads.node_nics", ["--ifname", "ens5"], tag="nics", nproc=1)

Each node's first rank (LOCAL_RANK 0) speaks for its node (named by the launcher, CARDTIME_NODE_NAME, else its
hostname as Slurm names it): `ibstat`/`ibv_devinfo` output kept in the node's raw folder, its rows emitted.
"""

from __future__ import annotations

import argparse
import os
import socket

from ..stages._node_nics import local_nics, rows_for
from .worker import worker_session


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ifname", default="", help="the interface the run talks over between nodes (always reported)")
    args = p.parse_args()
    with worker_session() as w:
        if w.local_rank == 0:
            nics, errors = local_nics(w.raw_dir, [args.ifname] if args.ifname else [])
            w.emit(rows_for(os.environ.get("CARDTIME_NODE_NAME") or socket.gethostname(), nics, errors))


if __name__ == "__main__":
    main()
