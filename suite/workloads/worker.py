"""What every torchrun worker does first and last: log redirect, process group, rows out, clean shutdown.

    with worker_session() as w:          # inside a module run by suite.launch.torchrun.run_torchrun
        x = torch.ones(4, device=w.device) dist.all_reduce(x) w.emit([Row(stage="bandwidth",
        case="all_reduce", metric="time_us", value=12.0, unit="us", rank=w.rank)])

The launcher passes CARDTIME_RAW_DIR, CARDTIME_OUT_DIR, CARDTIME_LOG_PREFIX, CARDTIME_BACKEND,
CARDTIME_DEVICE and CARDTIME_PG_TIMEOUT_S; torchrun passes RANK, WORLD_SIZE, LOCAL_RANK,
MASTER_ADDR, MASTER_PORT and TORCHELASTIC_RESTART_COUNT.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Iterable, Iterator

import torch
import torch.distributed as dist

from suite import workloads
from suite.forensics import answer as forensics
from suite.launch import procs
from suite.launch.torchrun import WORKER_PROGRESS
from suite.results import Row, atomic_write_text, write_rows_jsonl


@dataclass
class Worker:
    rank: int
    world: int
    local_rank: int
    backend: str
    device: torch.device
    out_dir: Path
    raw_dir: Path
    restart_count: int
    rows: list[Row] = field(default_factory=list)

    def emit(self, rows: Iterable[Row]) -> None:
        """Queue rows for the stage; they are written to rows.rank<N>.jsonl (also on every call, so a crash
        keeps them)."""
        self.rows.extend(rows)
        write_rows_jsonl(self.out_dir / f"rows.rank{self.rank}.jsonl", self.rows)

    def progress(self, message: str, done: int | None = None, of: int | None = None) -> None:
        """Tell the stage what the workers are doing (rank 0 speaks for all); the stage shows it with a
        bar."""
        if self.rank == 0:
            atomic_write_text(
                self.out_dir / WORKER_PROGRESS, json.dumps({"message": message, "done": done, "of": of})
            )

    def synchronize(self) -> None:
        """Wait for the device to finish queued work (a CPU–GPU sync point; a no-op on CPU)."""
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)


def redirect_output(raw_dir: Path, prefix: str, rank: int) -> None:
    """Send this process's stdout and stderr (C++ included) to raw/<stage>/<prefix>rank<N>.log, appending
    across restarts."""
    raw_dir.mkdir(parents=True, exist_ok=True)
    log = open(raw_dir / f"{prefix}rank{rank}.log", "ab", buffering=0)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(log.fileno(), 1)
    os.dup2(log.fileno(), 2)
    sys.stdout = open(1, "w", buffering=1, closefd=False)
    sys.stderr = open(2, "w", buffering=1, closefd=False)


def init_process_group(backend: str, device: torch.device, timeout_s: float) -> None:
    """Join the group, through a store prefixed by the restart attempt.

    After torchrun restarts a group, a plain init reads the dead ranks' addresses from the shared
    store and fails with `Connection refused`; a PrefixStore per attempt gives each attempt its
    own keys (measured on gloo: the new group is up 2–3 s after the kill).
    """
    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    timeout = timedelta(seconds=timeout_s)
    store = dist.TCPStore(
        os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), is_master=False, timeout=timeout
    )
    prefixed = dist.PrefixStore(f"attempt{attempt}", store)
    kwargs = {"device_id": device} if device.type == "cuda" else {}
    dist.init_process_group(backend, store=prefixed, rank=rank, world_size=world, timeout=timeout, **kwargs)


def shutdown() -> None:
    """Barrier, then destroy: without the barrier gloo workers sometimes abort at exit (SIGABRT)."""
    if dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()


@contextlib.contextmanager
def worker_session(
    *, redirect: bool = True, timeout_s: float | None = None, exit_when_done: bool = True
) -> Iterator[Worker]:
    """Join the group for the block; on leaving it cleanly: barrier, destroy, and (by default) exit at once.

    Exiting at once: after importing torch (and dynamo, DTensor), Python's own teardown takes 1.4–2.6 s
    per process on an idle 2-core machine and far more under load, and every rank pays it together;
    os._exit takes 0.1 s. The rows are already on disk (Worker.emit writes them atomically). An
    exception leaving the block skips all of this: the worker dies with it and torchrun sees the failure.
    """
    # A worker outliving its torchrun would hold ports and CPU until its collective timeout.
    # Read here, not imported by value: the warm launcher forks ranks from a process that imported this module
    # earlier and sets the package's LAUNCHER_PID to the rank's agent (suite/launch/zygote.py).
    procs.die_with_parent(expected_parent=workloads.LAUNCHER_PID)
    rank = int(os.environ["RANK"])
    raw_dir = Path(os.environ.get("CARDTIME_RAW_DIR", "."))
    out_dir = Path(os.environ.get("CARDTIME_OUT_DIR", "."))
    if redirect:
        redirect_output(raw_dir, os.environ.get("CARDTIME_LOG_PREFIX", ""), rank)
    backend = os.environ.get("CARDTIME_BACKEND", "gloo")
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if os.environ.get("CARDTIME_DEVICE", "cpu") == "cuda":
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    else:
        device = torch.device("cpu")
    timeout = timeout_s if timeout_s is not None else float(os.environ.get("CARDTIME_PG_TIMEOUT_S", "60"))
    init_process_group(backend, device, timeout)
    worker = Worker(
        rank=rank,
        world=int(os.environ["WORLD_SIZE"]),
        local_rank=local_rank,
        backend=backend,
        device=device,
        out_dir=out_dir,
        raw_dir=raw_dir,
        restart_count=int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")),
    )
    print(
        f"rank {rank}/{worker.world} up: backend={backend} device={device} attempt={worker.restart_count}",
        flush=True,
    )
    write_rows_jsonl(out_dir / f"rows.rank{rank}.jsonl", [])
    forensics.start(rank, raw_dir, os.environ.get("CARDTIME_LOG_PREFIX", ""))
    try:
        yield worker
    except Exception as e:  # the rank's own record of where it was, for the launcher's diagnosis
        forensics.leave_post_mortem(e)
        raise
    shutdown()
    if exit_when_done:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
