"""Test workload: each rank all-reduces its rank and reports what it sees.

--fail-rank R makes rank R exit 3, --kill-rank R makes it SIGKILL itself, --hang-rank R makes it sleep (the
others then wait in the closing barrier): the launchers' failure paths, on real processes.
"""

import argparse
import os
import signal
import sys
import time

import torch
import torch.distributed as dist

from suite.results import Row
from suite.workloads.worker import worker_session

# What torchrun's agent sets for a worker (LocalElasticAgent) and what suite.launch.torchrun.worker_env adds:
# the warm launcher must give the same.
REPORTED = (
    "OMP_NUM_THREADS",
    "GLOO_SOCKET_IFNAME",
    "MASTER_ADDR",
    "MASTER_PORT",
    "CARDTIME_BACKEND",
    "RANK",
    "LOCAL_RANK",
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "GROUP_RANK",
    "GROUP_WORLD_SIZE",
    "ROLE_RANK",
    "ROLE_NAME",
    "ROLE_WORLD_SIZE",
    "TORCHELASTIC_RESTART_COUNT",
    "TORCHELASTIC_MAX_RESTARTS",
    "TORCHELASTIC_RUN_ID",
    "TORCHELASTIC_USE_AGENT_STORE",
    "TORCH_NCCL_ASYNC_ERROR_HANDLING",
    "PYTHONPATH",
    "CARDTIME_OUT_DIR",
    "CARDTIME_RAW_DIR",
    "CARDTIME_LOG_PREFIX",
    "CARDTIME_PG_TIMEOUT_S",
)

parser = argparse.ArgumentParser()
parser.add_argument("--fail-rank", type=int, default=-1)
parser.add_argument("--kill-rank", type=int, default=-1)
parser.add_argument("--hang-rank", type=int, default=-1)
args = parser.parse_args()

with worker_session() as w:
    x = torch.tensor([float(w.rank)])
    dist.all_reduce(x)
    rows = [
        Row(
            stage="test",
            case="sum_of_ranks",
            metric="value",
            value=float(x.item()),
            unit="count",
            rank=w.rank,
            world=w.world,
        ),
        Row(stage="test", case="process", metric="pid", value=float(os.getpid()), unit="count", rank=w.rank),
        Row(
            stage="test",
            case="process",
            metric="threads",
            value=float(torch.get_num_threads()),
            unit="count",
            rank=w.rank,
        ),
        Row(
            stage="test",
            case="process",
            metric="argv",
            value=float("nan"),
            unit="",
            rank=w.rank,
            text=" ".join(sys.argv[1:]),
        ),
    ]
    for var in REPORTED:
        rows.append(
            Row(
                stage="test",
                case="env",
                metric=var,
                value=float("nan"),
                unit="",
                rank=w.rank,
                text=os.environ.get(var),
            )
        )
    w.emit(rows)
    print(f"rank {w.rank} emitted {len(rows)} rows", flush=True)
    if w.rank == args.fail_rank:
        print(f"rank {w.rank} failing on purpose", file=sys.stderr, flush=True)
        os._exit(3)
    if w.rank == args.kill_rank:
        print(f"rank {w.rank} killing itself", file=sys.stderr, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    if w.rank == args.hang_rank:
        print(f"rank {w.rank} hanging on purpose", file=sys.stderr, flush=True)
        time.sleep(600)
