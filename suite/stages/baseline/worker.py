"""The baseline: the GPT model at TP=1 on one device, trained for a few steps and measured.

    rows = measure_baseline(profile.model, torch.device("cuda", 0))      # in the stage's process
    python -m torch.distributed.run --nproc-per-node=1 -m suite.stages.baseline.worker --model '{…}'

Build, optimizer and warm-up steps run under the peak-memory measurement; then `steps` training
steps are timed. On a GPU, MFU = training FLOPs per token × tokens/s ÷ the card's bf16 dense
peak (suite/hardware/gpus.py); on a CPU there is no peak to hold it to.
"""

from __future__ import annotations

import torch

from suite.config import GptConfig
from suite.costmodel.mfu import mfu
from suite.costmodel.sizing import FLOPS_FORMULA, parameter_count, training_flops_per_token
from suite.hardware.gpus import gpu_for
from suite.results import Row
from suite.workloads.gpt import build_model, synthetic_batch
from suite.workloads.measure import PeakMemory, time_steps, typical
from suite.workloads.training import make_optimizer, train_step

STAGE = "baseline"


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    import platform

    return platform.processor() or platform.machine() or "cpu"


def measure_baseline(cfg: GptConfig, device: torch.device) -> list[Row]:
    """Rows: step time, tokens/s, peak memory, and on a GPU the MFU against the card's peak."""
    batches = [synthetic_batch(cfg, s, device=device) for s in range(cfg.warmup_steps + cfg.steps)]
    with PeakMemory(device) as memory:
        model = build_model(cfg, device)
        optimizer = make_optimizer(model.parameters())
        for s in range(cfg.warmup_steps):
            train_step(model, optimizer, *batches[s])
    counter = iter(range(cfg.warmup_steps, cfg.warmup_steps + cfg.steps))
    step_s = typical(
        time_steps(lambda: train_step(model, optimizer, *batches[next(counter)]), cfg.steps, device)
    )
    tokens_per_s = cfg.batch * cfg.seq_len / step_s
    flops = training_flops_per_token(cfg)
    name = device_name(device)
    common = dict(stage=STAGE, case="train_step", tp=1, world=1, dtype=cfg.dtype, source="torch")
    rows = [
        Row(metric="step_time_s", value=step_s, unit="s", **common),
        Row(metric="tokens_per_s", value=tokens_per_s, unit="tokens/s", **common),
        Row(metric="peak_memory_bytes", value=float(memory.peak_bytes), unit="bytes", **common),
        Row(metric="flops_per_token", value=flops, unit="FLOP", text=FLOPS_FORMULA, **common),
        Row(metric="parameters", value=parameter_count(cfg), unit="count", **common),
        Row(metric="achieved_tflops", value=flops * tokens_per_s / 1e12, unit="TFLOP/s", **common),
        Row(metric="device", value=float("nan"), unit="", text=name, **common),
    ]
    if device.type == "cuda":
        gpu = gpu_for(name)
        peak = gpu.bf16_dense_tflops if gpu and gpu.bf16_dense_tflops else None
        rows.append(
            Row(
                metric="peak_tflops",
                value=peak if peak else float("nan"),
                unit="TFLOP/s",
                text=gpu.peak_source if gpu else f"{name}: not in suite/hardware/gpus.py",
                **common,
            )
        )
        rows.append(
            Row(
                metric="mfu",
                value=mfu(flops, tokens_per_s, peak * 1e12 if peak else float("nan")),
                unit="ratio",
                **common,
            )
        )
    return rows


def main() -> None:
    from suite.workloads.worker import worker_session
    from suite.workloads.worker_cli import model_from, parser

    args = parser(__doc__.splitlines()[0]).parse_args()
    with worker_session() as w:
        rows = measure_baseline(model_from(args), w.device)
        if w.rank == 0:
            w.emit(rows)


if __name__ == "__main__":
    main()
