"""`python -m suite.cluster.nodeprobe [--ifname IF]`: one node's NICs for the topology stage of a multi-node
run, as rows in $CARDTIME_RAW_DIR/nic-rows.jsonl (the RDMA tool's output beside them). No torch: it runs on
every node at once over ssh or srun (suite/cluster/multilaunch.py's run_on_each_node) in well under a second;
suite/cluster/node_nics.py judges.
"""

from __future__ import annotations

import argparse
import os
import socket
from pathlib import Path

from suite.cluster.node_nics import ROWS_FILE, local_nics, rows_for
from suite.results import write_rows_jsonl


def main() -> None:
    p = argparse.ArgumentParser(description="this node's NICs for the topology stage of a multi-node run")
    p.add_argument(
        "--ifname",
        default="",
        help="the interfaces the run talks over between nodes, comma-separated (always reported)",
    )
    args = p.parse_args()
    raw = Path(os.environ.get("CARDTIME_RAW_DIR", "."))
    raw.mkdir(parents=True, exist_ok=True)
    nics, errors = local_nics(raw, [n for n in args.ifname.split(",") if n])
    write_rows_jsonl(
        raw / ROWS_FILE, rows_for(os.environ.get("CARDTIME_NODE_NAME") or socket.gethostname(), nics, errors)
    )
    print(f"{len(nics)} NICs, {len(errors)} errors → {raw / ROWS_FILE}")


if __name__ == "__main__":
    main()
