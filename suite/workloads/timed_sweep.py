"""The torch sweep's loop under its time box (suite/costmodel/size_budget.py): each size's rows written as it
is measured, the next size run only if the previous one's time says it ends before the stage's time does.

The sweep's plan is (collective, size, placement) in collective-major order; one step is every placement of
one size. After each step the ranks agree, in one all-reduce (MAX), on the step's wall time and on the time
since the sweep began, so that every rank drops the same sizes. A dropped size gives a `dropped` row (unit s,
value: the predicted seconds) whose text says why; the stage's judge lists them.
"""

from __future__ import annotations

import itertools
import time
from typing import Callable

import torch
import torch.distributed as dist

from suite.costmodel.size_budget import SizeBudget
from suite.results import Row
from suite.workloads.worker import Worker


def agreed(w: Worker, wall_s: float, elapsed_s: float) -> tuple[float, float]:
    """The slowest rank's step time and elapsed time: the same numbers on every rank."""
    t = torch.tensor([wall_s, elapsed_s], dtype=torch.float64, device=w.device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return float(t[0].item()), float(t[1].item())


def run_steps(
    w: Worker,
    plan: list[tuple[str, int, str]],
    budget_s: float | None,
    args,
    measure_step: Callable[[str, int, str], list[Row]],
) -> int:
    """Measure the plan step by step (rows emitted as measured), dropping what the time box says; the number
    of cases measured. `measure_step(name, size, placement)` returns rank 0's rows of one case."""
    start = time.monotonic()
    names = list(dict.fromkeys(name for name, _, _ in plan))
    box = SizeBudget(total_s=budget_s, series=names)
    done = 0
    for (name, size), cases in itertools.groupby(plan, key=lambda c: (c[0], c[1])):
        cases = list(cases)
        why = box.before(name, size)
        if why is not None:
            if w.rank == 0:
                w.emit(
                    [
                        Row(
                            stage=args.stage,
                            case=name,
                            metric="dropped",
                            value=float("nan"),
                            unit="s",
                            size_bytes=size,
                            dtype=args.dtype,
                            placement=placement,
                            source="torch",
                            world=w.world,
                            algo=args.algo,
                            text=why,
                        )
                        for _, _, placement in cases
                    ]
                )
            continue
        began = time.monotonic()
        for _, _, placement in cases:
            w.progress(f"{name} {placement} {size} B", done=done, of=len(plan))
            w.emit(measure_step(name, size, placement))
            done += 1
        wall, elapsed = agreed(w, time.monotonic() - began, time.monotonic() - start)
        box.after(name, size, wall, elapsed)
    return done
