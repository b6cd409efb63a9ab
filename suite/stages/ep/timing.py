"""The ep stage's timings: the dispatch all-to-all's bandwidth at the model's sizes, the layer's step
time (forward and backward) per capacity factor, and the skewed router's cost in time.

    rows = step_times(w, group, shape, router, skew, reps, dtype)       # one router, one capacity factor
    rows += dispatch_bandwidth(w, group, shape, router, skew, reps, dtype)

Bandwidth counts the bytes leaving this rank (its rows for other ranks' experts) over the time of the
variable all_to_all; the slowest rank's time and the largest rank's bytes are reported.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from suite.results import Row
from suite.stages.ep.moe_layer import MoeShape, kept_assignments, moe_expert_parallel, moe_weights
from suite.stages.ep.moe_routing import skew_bias
from suite.stages.ep.moe_transport import exchange_counts, variable_all_to_all
from suite.workloads.golden import group_max
from suite.workloads.measure import time_steps, typical

STAGE = "ep"


def _setup(w, group, shape: MoeShape, skew: float, dtype):
    me, n = dist.get_rank(group), dist.get_world_size(group)
    per_rank = shape.experts // n
    weights = moe_weights(shape, 0, w.device, dtype)
    local = {
        "router": weights["router"].requires_grad_(True),
        "w1": weights["w1"][me * per_rank : (me + 1) * per_rank].clone().requires_grad_(True),
        "w2": weights["w2"][me * per_rank : (me + 1) * per_rank].clone().requires_grad_(True),
    }
    gen = torch.Generator().manual_seed(100 + me)
    x = torch.randn(shape.tokens, shape.hidden, generator=gen).to(w.device, dtype).requires_grad_(True)
    bias = skew_bias(shape.experts, skew).to(w.device, dtype) if skew else None
    return local, x, bias


def cf_label(capacity_factor: float) -> str:
    return f"cf{capacity_factor:g}" if capacity_factor > 0 else "cf_none"


def step_times(w, group, shape: MoeShape, router: str, skew: float, reps: int, dtype) -> list[Row]:
    local, x, bias = _setup(w, group, shape, skew, dtype)

    def step():
        y, *_ = moe_expert_parallel(x, local, shape, group, bias)
        y.sum().backward()

    step()
    seconds = group_max(typical(time_steps(step, reps, w.device)), group)
    return [
        Row(
            stage=STAGE,
            case=f"step.{cf_label(shape.capacity_factor)}",
            metric="time_s",
            value=seconds,
            unit="s",
            algo=router,
            world=dist.get_world_size(group),
            count=shape.tokens,
            dtype=str(dtype).removeprefix("torch."),
            source="hand",
            rank=w.rank,
        )
    ]


def dispatch_bandwidth(w, group, shape: MoeShape, router: str, skew: float, reps: int, dtype) -> list[Row]:
    me, n = dist.get_rank(group), dist.get_world_size(group)
    local, x, bias = _setup(w, group, shape, skew, dtype)
    with torch.no_grad():
        token, expert, _, _ = kept_assignments(x, local["router"], shape, bias)
        send = torch.bincount(expert // (shape.experts // n), minlength=n)
        recv = exchange_counts(send, group).tolist()
        send = send.tolist()
        rows = x[token].contiguous()
        step = lambda: variable_all_to_all(rows, recv, send, group)  # noqa: E731
        step()
        seconds = group_max(typical(time_steps(step, reps, w.device)), group)
    leaving = (sum(send) - send[me]) * shape.hidden * rows.element_size()
    leaving = group_max(float(leaving), group)
    common = dict(
        stage=STAGE,
        case="dispatch",
        algo=router,
        world=n,
        size_bytes=int(leaving),
        count=shape.tokens,
        dtype=str(dtype).removeprefix("torch."),
        source="hand",
        rank=w.rank,
    )
    return [
        Row(metric="time_s", value=seconds, unit="s", **common),
        Row(
            metric="algbw",
            value=leaving / seconds / 1e9 if seconds > 0 else float("nan"),
            unit="GB/s",
            **common,
        ),
    ]
