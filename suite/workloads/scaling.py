"""What the scaling workers (tp_run, dp_run, zero_run) share: their command line and their step loop.

The stage hands the worker the profile's model as JSON (`--model`), so a worker trains exactly
the model the stage's expectations were computed for:

    ctx.torchrun("suite.workloads.dp_run", [*model_args(profile.model), "--degrees", "1,2,4"])
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from typing import Callable

import torch

from ..config import ModelConfig
from .measure import time_steps


def model_args(cfg: ModelConfig) -> list[str]:
    """The command-line arguments that carry `cfg` to a worker."""
    return ["--model", json.dumps(dataclasses.asdict(cfg), sort_keys=True)]


def parser(description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--model", required=True, help="the ModelConfig as JSON (model_args())")
    p.add_argument("--mistakes", default="", help="comma-separated deliberate mistakes to check as well (tests)")
    return p


def model_from(args: argparse.Namespace) -> ModelConfig:
    return ModelConfig(**json.loads(args.model))


def mistakes_from(args: argparse.Namespace) -> list[str]:
    return [m.strip() for m in args.mistakes.split(",") if m.strip()]


def degrees_from(text: str) -> list[int]:
    return [int(d) for d in text.split(",") if d.strip()]


def run_steps(step: Callable[[int], object], first: int, warmup: int, timed: int,
              device: torch.device) -> list[float]:
    """Call step(i) for i = first … first+warmup−1 untimed, then `timed` more timed; seconds per timed step.

    Each step gets its own global step index, so every step trains on its own synthetic batch.
    """
    for i in range(first, first + warmup):
        step(i)
    counter = iter(range(first + warmup, first + warmup + timed))
    return time_steps(lambda: step(next(counter)), timed, device)
