"""The fault drill's worker: DDP training with DCP checkpoints, one rank faulting at a chosen step.

    python -m torch.distributed.run --nproc-per-node=2 --max-restarts=1 ... -m suite.stages.fault.drill_worker
    \
        --scenario crash --steps 8 --checkpoint-every 2 --fault-step 5 --fault-rank 1 --pg-timeout 5 \
        --model '{"vocab": 256, ...}'

Steps are numbered from 0. After step s completes, s + 1 steps are done; when s + 1 is a multiple
of --checkpoint-every (and not the last step) the model and optimizer state go to
`ckpt/step_<s+1>/` through torch.distributed.checkpoint. A checkpoint is complete once DCP has
written its `.metadata` (the coordinator writes it last), so a crash mid-save is never resumed from.

On the first attempt (TORCHELASTIC_RESTART_COUNT 0) rank --fault-rank faults in the middle of
step --fault-step, after the forward and before the backward's gradient all-reduce:
  crash      SIGKILL itself
  hang       SIGSTOP itself (its sockets stay open: the others wait for the process-group timeout)
  exception  raise in the middle of the step
Every other rank is then blocked in the all-reduce; after --pg-timeout at the latest (the timeout
of the group that carries the training traffic) it raises, and that first error is recorded and
re-raised, so the process exits non-zero and torchrun restarts the group. The new attempt joins
through its own PrefixStore (worker_session), loads the newest complete checkpoint and trains to
the end. Joining and DCP's coordination use the default group with --join-timeout: joining waits
for the slowest rank's start-up, which must not be mistaken for the fault.

Every fact the stage measures is an event in `events.rank<N>.jsonl` beside the logs, one JSON
object per line with a wall-clock `t` (time.time(), comparable across processes of one host):
spawn (the process's start time, from /proc), group_up, settings, resumed, step (with the
all-reduced loss), checkpoint, fault, error, done.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import time
from datetime import timedelta
from pathlib import Path

from suite import workloads
from suite.launch import procs

if __name__ == "__main__":
    # Before `import torch` (seconds): a worker whose torchrun is killed meanwhile must not linger.
    procs.die_with_parent()

import torch.distributed as dist  # noqa: E402
import torch.distributed.checkpoint as dcp  # noqa: E402
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict  # noqa: E402

from suite.config import GptConfig  # noqa: E402
from suite.workloads.gpt import build_model  # noqa: E402
from suite.workloads.training import local_batch, make_optimizer, train_step, wrap_ddp  # noqa: E402
from suite.workloads.worker import worker_session  # noqa: E402

SCENARIOS = ("crash", "hang", "exception")
CHECKPOINT_DIR = "ckpt"
# The watchdog settings of ProcessGroupNCCL that decide whether a dead peer ends in an error or a hang.
NCCL_WATCHDOG_ENV = (
    "TORCH_NCCL_ASYNC_ERROR_HANDLING",
    "TORCH_NCCL_BLOCKING_WAIT",
    "TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC",
)


class InjectedFault(RuntimeError):
    """The exception scenario's own error, raised by the faulting rank."""


# ---------------------------------------------------------------- events


def process_start_time() -> float:
    """When this process was created, wall-clock seconds: from /proc on Linux (10 ms ticks), else now.

    The moment torchrun spawned a worker is what "torchrun restarted the group" means; the interpreter and
    `import torch` take another second or more after it. A worker forked from the warm launcher's zygote takes
    the start of the process torchrun spawned for it (suite/launch/warm_python.py).
    """
    if workloads.SPAWNED_AT is not None:
        return workloads.SPAWNED_AT
    try:
        fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
        started_ticks = int(fields[19])  # field 22 of stat(5), counted after pid and comm
        uptime_s = float(Path("/proc/uptime").read_text().split()[0])
        age_s = uptime_s - started_ticks / os.sysconf("SC_CLK_TCK")
        return time.time() - max(age_s, 0.0)
    except (OSError, ValueError, IndexError):
        return time.time()


class EventLog:
    """Appends one JSON object per line to events.rank<N>.jsonl; each line is on disk before the next
    fault."""

    def __init__(self, folder: Path, rank: int, attempt: int):
        folder.mkdir(parents=True, exist_ok=True)
        self.path = folder / f"events.rank{rank}.jsonl"
        self.rank, self.attempt = rank, attempt

    def write(self, event: str, t: float | None = None, **fields) -> None:
        record = {
            "event": event,
            "t": time.time() if t is None else t,
            "rank": self.rank,
            "attempt": self.attempt,
            **fields,
        }
        # One write() of one line on an O_APPEND descriptor: the kernel keeps it whole even if we die next.
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, (json.dumps(record) + "\n").encode())
        finally:
            os.close(fd)


def first_line(error: BaseException) -> str:
    text = str(error).strip()
    return f"{type(error).__name__}: {text.splitlines()[0] if text else ''}".rstrip(": ")


# ---------------------------------------------------------------- checkpoints


def checkpoint_path(folder: Path, done_steps: int) -> Path:
    return folder / f"step_{done_steps:06d}"


def latest_checkpoint(folder: Path) -> tuple[int, Path] | None:
    """(steps done, path) of the newest checkpoint DCP finished writing; None when there is none."""
    complete = [(int(p.name.split("_")[1]), p) for p in folder.glob("step_*") if (p / ".metadata").exists()]
    return max(complete) if complete else None


def save_checkpoint(model, optimizer, folder: Path, done_steps: int) -> Path:
    model_state, optim_state = get_state_dict(model, optimizer)
    path = checkpoint_path(folder, done_steps)
    dcp.save({"model": model_state, "optim": optim_state}, checkpoint_id=str(path))
    return path


def load_checkpoint(model, optimizer, path: Path) -> None:
    model_state, optim_state = get_state_dict(model, optimizer)
    state = {"model": model_state, "optim": optim_state}
    dcp.load(state, checkpoint_id=str(path))
    set_state_dict(model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optim"])


def prune_checkpoints(folder: Path, keep: Path) -> None:
    """Only the newest complete checkpoint is ever resumed from; older ones only fill the disk (GBs on
    GPUs)."""
    import shutil

    for old in folder.glob("step_*"):
        if old != keep:
            shutil.rmtree(old, ignore_errors=True)


def fault(kind: str, events: EventLog, step: int) -> None:
    events.write("fault", step=step, kind=kind, pid=os.getpid(), started=procs.start_ticks())
    if kind == "crash":
        os.kill(os.getpid(), signal.SIGKILL)
    elif kind == "hang":
        os.kill(os.getpid(), signal.SIGSTOP)
        # Only reached if someone sends SIGCONT: behave like a rank that recovered too late.
        events.write("continued", step=step)
    elif kind == "exception":
        raise InjectedFault(f"injected fault: rank {events.rank} raises in the middle of step {step}")
    else:
        raise ValueError(f"unknown scenario {kind!r}: choose one of {', '.join(SCENARIOS)}")


def train(args, w, events: EventLog, group) -> None:
    cfg = GptConfig(**json.loads(args.model))
    model = build_model(cfg, w.device)
    ddp = wrap_ddp(model, w.device, group=group)
    optimizer = make_optimizer(ddp.parameters())
    folder = w.raw_dir / CHECKPOINT_DIR
    start = 0
    found = latest_checkpoint(folder)
    if found is not None:
        start, path = found
        load_checkpoint(ddp, optimizer, path)
        events.write("resumed", step=start, checkpoint=path.name)
    else:
        events.write("resumed", step=0, checkpoint=None)
    for step in range(start, args.steps):
        tokens, targets = local_batch(cfg, step, w.rank, w.world, device=w.device)
        if w.restart_count == 0 and step == args.fault_step and w.rank == args.fault_rank:
            # After the forward, before the backward: the others are then waiting in DDP's gradient
            # all-reduce.
            model.register_forward_hook(lambda *_: fault(args.scenario, events, step))
        mean = train_step(ddp, optimizer, tokens, targets).clone()
        # the global batch's loss: the mean of equal shares' means
        dist.all_reduce(mean, op=dist.ReduceOp.AVG, group=group)
        events.write("step", step=step, loss=float(mean))  # float(): a CPU–GPU sync point on GPUs
        done = step + 1
        if done % args.checkpoint_every == 0 and done < args.steps:
            began = time.time()
            path = save_checkpoint(ddp, optimizer, folder, done)
            if w.rank == 0:
                prune_checkpoints(folder, keep=path)
                events.write("checkpoint", step=done, seconds=time.time() - began, path=path.name)


def main(argv: list[str] | None = None) -> None:
    spawned = process_start_time()
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scenario", choices=SCENARIOS, required=True)
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--checkpoint-every", type=int, required=True)
    parser.add_argument("--fault-step", type=int, required=True)
    parser.add_argument("--fault-rank", type=int, required=True)
    parser.add_argument(
        "--pg-timeout",
        type=float,
        required=True,
        help="timeout of the training group (DDP's all-reduce), seconds",
    )
    parser.add_argument(
        "--join-timeout",
        type=float,
        default=60.0,
        help="timeout of joining and of the default group (checkpoint coordination), seconds",
    )
    parser.add_argument("--model", required=True, help="the GptConfig as JSON")
    args = parser.parse_args(argv)

    rank = int(os.environ["RANK"])
    attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    events = EventLog(Path(os.environ.get("CARDTIME_RAW_DIR", ".")), rank, attempt)
    events.write("spawn", t=spawned, pid=os.getpid())
    # Joining waits for the slowest rank's `import torch` (seconds on a busy machine): it gets the long
    # timeout. The training traffic gets a group of its own with the short one the drill measures.
    with worker_session(timeout_s=max(args.join_timeout, args.pg_timeout)) as w:
        group = dist.new_group(timeout=timedelta(seconds=args.pg_timeout))
        events.write("group_up")
        if rank == 0 and attempt == 0:
            events.write(
                "settings",
                backend=w.backend,
                pg_timeout_s=args.pg_timeout,
                join_timeout_s=args.join_timeout,
                world=w.world,
                env={k: os.environ.get(k) for k in NCCL_WATCHDOG_ENV},
            )
        try:
            train(args, w, events, group)
        except InjectedFault:
            raise
        except Exception as error:  # a surviving rank: record what it raised, then fail so torchrun restarts
            events.write("error", type=type(error).__name__, first_line=first_line(error))
            raise
        events.write("done")


if __name__ == "__main__":
    main()
