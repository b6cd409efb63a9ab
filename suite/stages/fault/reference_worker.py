"""The fault drill's uninterrupted reference: one process training the full global batch, the loss of every
step.

    python -m suite.stages.fault.reference_worker --model '{"vocab": 256, ...}' --steps 6 --device cpu --out
    FILE

DDP averages the ranks' gradients of equal shares, which is the full batch's gradient, so the
drill follows this trajectory up to the order of floating-point sums. A process of its own (the
stage starts it beside the drills): under the warm launcher it is forked from the zygote, which
has already imported what its first step needs (the optimizer's first step imports torch._dynamo:
3–4 s of CPU in a process that has not), and on a GPU it frees its card for the drill's rank 0
when it exits. Writes {"losses": [...], "device": ...} to --out.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from suite.config import GptConfig
from suite.results import atomic_write_text, dumps


def reference_losses(model_cfg: GptConfig, steps: int, device: str) -> list[float]:
    """Every step's loss of the uninterrupted run in this process, same seed and data as the drill."""
    from suite.workloads.gpt import build_model, synthetic_batch
    from suite.workloads.training import make_optimizer, train_step

    model = build_model(model_cfg, device)
    optimizer = make_optimizer(model.parameters())
    losses = []
    for step in range(steps):
        tokens, targets = synthetic_batch(model_cfg, step, device=device)
        losses.append(float(train_step(model, optimizer, tokens, targets)))
    return losses


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", required=True, help="the GptConfig as JSON")
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--device", default="cpu", help="cpu or cuda:N")
    parser.add_argument("--out", required=True, help="where the losses go (JSON)")
    args = parser.parse_args(argv)
    losses = reference_losses(GptConfig(**json.loads(args.model)), args.steps, args.device)
    atomic_write_text(Path(args.out), dumps({"losses": losses, "device": args.device}))


if __name__ == "__main__":
    main()
