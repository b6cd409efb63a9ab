"""Test workload: each rank all-reduces its rank and reports what it sees; --fail-rank makes one rank exit 3."""

import argparse
import os
import sys

import torch
import torch.distributed as dist

from suite.results import Row
from suite.workloads.worker import worker_session

parser = argparse.ArgumentParser()
parser.add_argument("--fail-rank", type=int, default=-1)
args = parser.parse_args()

with worker_session() as w:
    x = torch.tensor([float(w.rank)])
    dist.all_reduce(x)
    rows = [Row(stage="test", case="sum_of_ranks", metric="value", value=float(x.item()), unit="count", rank=w.rank,
                world=w.world)]
    for var in ("OMP_NUM_THREADS", "GLOO_SOCKET_IFNAME", "MASTER_ADDR", "CARDTIME_BACKEND"):
        rows.append(Row(stage="test", case="env", metric=var, value=float("nan"), unit="", rank=w.rank,
                        text=os.environ.get(var)))
    w.emit(rows)
    print(f"rank {w.rank} emitted {len(rows)} rows", flush=True)
    if w.rank == args.fail_rank:
        print(f"rank {w.rank} failing on purpose", file=sys.stderr, flush=True)
        os._exit(3)
