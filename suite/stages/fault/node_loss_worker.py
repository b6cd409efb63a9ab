"""The node-loss drill's worker: DDP training with checkpoints on every node, one whole node lost mid-step.

    torchrun --nnodes=1:2 --max-restarts=1 … -m suite.stages.fault.node_loss_worker --lose node-b --steps 6 \
        --checkpoint-every 2 --fault-step 5 --pg-timeout 5 --checkpoint-dir RUN/raw/fault/node_loss/ckpt
        --model '{…}'

The fault drill's training (suite/stages/fault/drill_worker.py: its event log), where the fault is a node: on
the first attempt, in the middle of step --fault-step (after the forward, before the gradient all-reduce), the
first rank of node --lose (CARDTIME_NODE_NAME) SIGKILLs its node's torchrun agent and then itself; the node's
other ranks die with their agent (PR_SET_PDEATHSIG). The survivors are blocked in the all-reduce; their error
is recorded and raised, their agents restart them (--max-restarts) and, the rendezvous being elastic, go on
without the lost node: the global batch is split among fewer ranks, so the trajectory is the same, and the
steps since the last checkpoint are computed again (`step` events of attempt 1). Checkpoints go to
--checkpoint-dir on every node's own disk (suite/stages/fault/node_checkpoint.py: each node's first rank
writes the whole replicated state there), so the survivors resume without the lost node's disk, with or
without shared storage.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import time
from datetime import timedelta
from pathlib import Path

from suite.launch import procs

if __name__ == "__main__":
    procs.die_with_parent()  # before `import torch`: a worker whose agent is killed must not linger

import torch.distributed as dist  # noqa: E402

from suite.config import GptConfig  # noqa: E402
from suite.stages.fault.drill_worker import EventLog, first_line, process_start_time  # noqa: E402
from suite.stages.fault.node_checkpoint import agreed_step, load_replica, save_replica  # noqa: E402
from suite.workloads.gpt import build_model  # noqa: E402
from suite.workloads.training import local_batch, make_optimizer, train_step, wrap_ddp  # noqa: E402
from suite.workloads.worker import worker_session  # noqa: E402


def lose_this_node(events: EventLog, step: int, node: str) -> None:
    """The node goes: its torchrun agent first (nothing of the node restarts), then this rank."""
    agent = os.getppid()
    events.write("fault", step=step, kind="node", node=node, pid=os.getpid(), agent_pid=agent)
    os.kill(agent, signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)


def train(args, w, events: EventLog, group, node: str) -> None:
    cfg = GptConfig(**json.loads(args.model))
    model = build_model(cfg, w.device)
    ddp = wrap_ddp(model, w.device, group=group)
    optimizer = make_optimizer(ddp.parameters())
    folder = Path(args.checkpoint_dir)
    start, path = agreed_step(folder, group, w.device), None
    if start:
        path = load_replica(model, optimizer, folder, start, w.device)
    events.write("resumed", step=start, checkpoint=path.name if path else None, world=w.world)
    for step in range(start, args.steps):
        tokens, targets = local_batch(cfg, step, w.rank, w.world, device=w.device)
        if w.restart_count == 0 and step == args.fault_step and node == args.lose and w.local_rank == 0:
            model.register_forward_hook(lambda *_: lose_this_node(events, step, node))
        mean = train_step(ddp, optimizer, tokens, targets).clone()
        dist.all_reduce(mean, op=dist.ReduceOp.AVG, group=group)
        events.write("step", step=step, loss=float(mean), world=w.world)
        done = step + 1
        if done % args.checkpoint_every == 0 and done < args.steps:
            save_replica(model, optimizer, folder, done, node, w.local_rank)
            if w.rank == 0:
                events.write("checkpoint", step=done)


def main(argv: list[str] | None = None) -> None:
    spawned = process_start_time()
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--lose", required=True, help="the node whose agent is killed (its CARDTIME_NODE_NAME)")
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--checkpoint-every", type=int, required=True)
    p.add_argument("--fault-step", type=int, required=True)
    p.add_argument("--pg-timeout", type=float, required=True, help="timeout of the training group, seconds")
    p.add_argument("--join-timeout", type=float, default=60.0, help="timeout of joining, seconds")
    p.add_argument(
        "--checkpoint-dir", required=True, help="a folder on each node's own disk (or a shared one)"
    )
    p.add_argument("--model", required=True, help="the GptConfig as JSON")
    args = p.parse_args(argv)
    node = os.environ.get("CARDTIME_NODE_NAME", "node")
    events = EventLog(
        Path(os.environ.get("CARDTIME_RAW_DIR", ".")),
        int(os.environ["RANK"]),
        int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")),
    )
    events.write("spawn", t=spawned, pid=os.getpid(), node=node)
    with worker_session(timeout_s=max(args.join_timeout, args.pg_timeout)) as w:
        group = dist.new_group(timeout=timedelta(seconds=args.pg_timeout))
        events.write("group_up", world=w.world, node=node)
        try:
            train(args, w, events, group, node)
        # a survivor: record what it raised, then fail so that torchrun restarts it
        except Exception as error:
            events.write("error", type=type(error).__name__, first_line=first_line(error), node=node)
            raise
        events.write("done", t=time.time(), node=node)


if __name__ == "__main__":
    main()
