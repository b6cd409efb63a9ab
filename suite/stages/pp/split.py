"""The GPT model cut into pipeline stages, and torch's schedules built over them.

    units = stage_units(cfg.layers, n_stages)                 # [["embed", 0], [1, "head"]] for 2 layers, 2
                                                              # stages
    stages = local_stages(full_model, "interleaved_1f1b", group, chunks=2, device=dev)
    schedule = make_schedule("interleaved_1f1b", stages, microbatches=4, loss_fn=loss_fn)

The model's units in order are the embedding, the blocks and the head (final norm + output
projection); a stage is a contiguous run of units. A stage module names its parameters as the whole
model does (`blocks.1.attn.q.weight`), so each rank compares its gradients with one process's by name.

Stage placement per schedule (P ranks in the group, v chunks):
  gpipe, 1f1b                                   one stage per rank: stage = rank, P stages
  interleaved_1f1b, looped_bfs, interleaved_zb  v stages per rank, looped: rank r holds r, r + P, …
  zbv, dualpipev                                two stages per rank, V-shaped: r and 2P − 1 − r
"""

from __future__ import annotations

import copy

import torch
import torch.distributed as dist
import torch.nn as nn

from suite.costmodel.bubble import SINGLE, V_SHAPED
from suite.costmodel.bubble import TORCH_SCHEDULES as SCHEDULES
from suite.workloads.gpt import GPT


def _schedule_class(name: str):
    from torch.distributed.pipelining import schedules as s

    return {
        "gpipe": s.ScheduleGPipe,
        "1f1b": s.Schedule1F1B,
        "interleaved_1f1b": s.ScheduleInterleaved1F1B,
        "looped_bfs": s.ScheduleLoopedBFS,
        "interleaved_zb": s.ScheduleInterleavedZeroBubble,
        "zbv": s.ScheduleZBVZeroBubble,
        "dualpipev": s.ScheduleDualPipeV,
    }[name]


def chunks_of(schedule: str, chunks: int) -> int:
    """Stages per rank: 1, the configured v (looped), or 2 (V-shaped)."""
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule {schedule!r} unknown: choose from {', '.join(SCHEDULES)}")
    return 1 if schedule in SINGLE else 2 if schedule in V_SHAPED else chunks


def stage_indices(schedule: str, rank: int, ranks: int, chunks: int) -> list[int]:
    """The global stage indices rank `rank` of `ranks` holds under `schedule`."""
    v = chunks_of(schedule, chunks)
    if schedule in V_SHAPED:
        return [rank, 2 * ranks - 1 - rank]
    return [rank + k * ranks for k in range(v)]


def stage_units(layers: int, n_stages: int, drop_layer: bool = False) -> list[list]:
    """Units ("embed", block indices, "head") of each stage, contiguous and as even as possible.

    drop_layer is the deliberate mistake of a stage boundary off by one: the last block of the first
    stage that ends in a block is assigned to no stage (the next stage starts after it).
    """
    units: list = ["embed", *range(layers), "head"]
    if n_stages > len(units):
        raise ValueError(
            f"{n_stages} pipeline stages but the model has only {len(units)} units "
            f"(embedding, {layers} blocks, head): give the pp section more layers or fewer stages"
        )
    base, extra = divmod(len(units), n_stages)
    out, start = [], 0
    for s in range(n_stages):
        end = start + base + (1 if s < extra else 0)
        out.append(units[start:end])
        start = end
    if drop_layer:
        for stage in out:
            if len(stage) > 1 and isinstance(stage[-1], int):
                stage.pop()
                break
    return out


class GptStage(nn.Module):
    """A contiguous slice of the GPT: optional embedding, some blocks, optional final norm and head."""

    def __init__(self, model: GPT, units: list):
        super().__init__()
        self.embed = copy.deepcopy(model.embed) if "embed" in units else None
        self.blocks = nn.ModuleDict(
            {str(u): copy.deepcopy(model.blocks[u]) for u in units if isinstance(u, int)}
        )
        self.norm = copy.deepcopy(model.norm) if "head" in units else None
        self.head = copy.deepcopy(model.head) if "head" in units else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.embed is not None:
            x = self.embed(x)
        for block in self.blocks.values():
            x = block(x)
        if self.head is not None:
            x = self.head(self.norm(x))
        # A fresh tensor, never a view of the input: the zero-bubble schedules detach stage outputs in place.
        return x if x._base is None else x.clone()


def local_stages(
    model: GPT,
    schedule: str,
    group: dist.ProcessGroup,
    chunks: int,
    device: torch.device,
    drop_layer: bool = False,
) -> list:
    """This rank's PipelineStages of `model` (on `device`) under `schedule` over `group`."""
    from torch.distributed.pipelining import PipelineStage

    if model.cfg.tied_head:
        raise ValueError(
            "the pp stage needs an untied head (tied_head=False): the embedding and the head "
            "live on different stages"
        )
    ranks, rank = dist.get_world_size(group), dist.get_rank(group)
    n_stages = ranks * chunks_of(schedule, chunks)
    units = stage_units(model.cfg.layers, n_stages, drop_layer)
    return [
        PipelineStage(GptStage(model, units[i]).to(device), i, n_stages, device, group=group)
        for i in stage_indices(schedule, rank, ranks, chunks)
    ]


def make_schedule(schedule: str, stages: list, microbatches: int, loss_fn, scale_grads: bool = True):
    """torch's schedule object over this rank's stages (a single stage for gpipe and 1f1b)."""
    cls = _schedule_class(schedule)
    return cls(
        stages[0] if schedule in SINGLE else stages, microbatches, loss_fn=loss_fn, scale_grads=scale_grads
    )


def stage_modules(stages: list) -> list[nn.Module]:
    return [s.submod for s in stages]


def holds(stages: list, which: str) -> bool:
    """Whether one of these stages is the first ("first") or last ("last") of the pipeline."""
    return any(s.is_first if which == "first" else s.is_last for s in stages)
