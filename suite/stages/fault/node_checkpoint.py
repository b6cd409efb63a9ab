"""Checkpoints for data-parallel training that survive a lost node without shared storage.

Under DDP every rank holds the same model and optimizer state, so every node already has the whole of it. Each
node's first rank (LOCAL_RANK 0) writes that state to the checkpoint folder on its own disk, as
`step_<done>.<node>.pt` (written under a temporary name, then renamed: a file with the final name is
complete). The same path on every node names each node's own disk on a cluster without shared storage, and one
folder holding every node's file on one that shares it; either way a survivor finds the state on its own node.

A resume agrees first: each rank offers the newest step it can read (any node's file), the group takes the
smallest (all_reduce MIN), and every rank loads that step, so ranks on different disks never resume from
different steps. Older files are kept for that reason (a node may lag one checkpoint behind). DCP
(torch.distributed.checkpoint) would not do: it de-duplicates replicated tensors across ranks, so each rank
writes only its share and the lost node's share is gone with its disk.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import torch
import torch.distributed as dist

_NAME = re.compile(r"^step_(\d+)\.(.+)\.pt$")


def replica_path(folder: Path, done_steps: int, node: str) -> Path:
    return folder / f"step_{done_steps}.{node}.pt"


def readable_steps(folder: Path) -> dict[int, Path]:
    """Steps done → one complete checkpoint file of that step this rank can read (its own node's first)."""
    out: dict[int, Path] = {}
    for path in sorted(folder.glob("step_*.pt")) if folder.is_dir() else ():
        match = _NAME.match(path.name)
        if match:
            out.setdefault(int(match.group(1)), path)
    return out


def save_replica(model, optimizer, folder: Path, done_steps: int, node: str, local_rank: int) -> Path | None:
    """The node's first rank writes the whole (replicated) state; the node's other ranks write nothing."""
    if local_rank != 0:
        return None
    folder.mkdir(parents=True, exist_ok=True)
    path = replica_path(folder, done_steps, node)
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    torch.save(
        {"model": model.state_dict(), "optim": optimizer.state_dict(), "done_steps": done_steps}, partial
    )
    os.replace(partial, path)
    return path


def agreed_step(folder: Path, group, device) -> int:
    """The newest step every rank of `group` can read (0: start over); a collective, every rank calls it."""
    steps = readable_steps(folder)
    newest = torch.tensor([max(steps) if steps else 0], dtype=torch.int64, device=device)
    dist.all_reduce(newest, op=dist.ReduceOp.MIN, group=group)
    return int(newest.item())


def load_replica(model, optimizer, folder: Path, done_steps: int, device) -> Path:
    """Model and optimizer state of `done_steps` from a file this rank reads."""
    path = readable_steps(folder).get(done_steps)
    if path is None:
        raise FileNotFoundError(
            f"no checkpoint of step {done_steps} under {folder} on this node, which the "
            "other ranks agreed to resume from: was it deleted?"
        )
    state = torch.load(path, map_location=device, weights_only=True)
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optim"])
    return path
