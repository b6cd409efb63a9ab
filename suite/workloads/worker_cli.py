"""What the scaling workers (the tp, dp and zero stages' worker.py) share: their command line.

The stage hands the worker the profile's model as JSON (`--model`), so a worker trains exactly
the model the stage's expectations were computed for:

    ctx.torchrun("suite.stages.dp.worker", [*model_args(profile.model), "--degrees", "1,2,4"])
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time

from suite.config import GptConfig


def model_args(cfg: GptConfig) -> list[str]:
    """The command-line arguments that carry `cfg` to a worker."""
    return ["--model", json.dumps(dataclasses.asdict(cfg), sort_keys=True)]


def parser(description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--model", required=True, help="the GptConfig as JSON (model_args())")
    p.add_argument(
        "--mistakes", default="", help="comma-separated deliberate mistakes to check as well (tests)"
    )
    return p


def model_from(args: argparse.Namespace) -> GptConfig:
    return GptConfig(**json.loads(args.model))


def mistakes_from(args: argparse.Namespace) -> list[str]:
    return [m.strip() for m in args.mistakes.split(",") if m.strip()]


def degrees_from(text: str) -> list[int]:
    return [int(d) for d in text.split(",") if d.strip()]


def log(t0: float, message: str) -> None:
    """One line in the rank's log: wall seconds since t0, CPU seconds of this process so far (imports
    included)."""
    print(f"{time.monotonic() - t0:6.1f} s wall, {time.process_time():6.1f} s cpu: {message}", flush=True)
