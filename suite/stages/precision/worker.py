"""Mixed-precision numerics on one device: fp16's narrow range, GradScaler, bf16, gradient clipping.

    rows = precision_rows(cfg, torch.device("cuda", 0))     # the precision stage's run(), in its own process

Two measurements (suite/stages/precision/__init__.py judges them):

* **Range probe.** One backward pass of the tiny GPT with the loss multiplied by 2^k, in fp32 and under
  autocast to bf16 and to fp16: gradient elements that are 0 where the fp32 reference is not (underflow:
  below fp16's smallest subnormal, 2^-24 ≈ 6e-8) and elements that are inf/NaN (overflow: above 65504).
  bf16 keeps fp32's 8-bit exponent, so neither happens to it at these factors.
* **Training.** `steps` AdamW steps of the same model on a few fixed batches, its loss multiplied by
  2^grad_shrink_log2 (standing for a mean over ~10^6 tokens: activation gradients land below fp16's range):
  fp32; bf16 autocast; fp16 autocast without a scaler (gradients flush to zero: the loss stalls); fp16 with
  torch.amp.GradScaler (started at 2^init_scale_log2, far above what the gradients bear, so it must back off:
  every step it skips is counted). Each run unscales, then clips the global norm at clip_norm (in the units of
  the unshrunk loss); AdamW's eps is 1e-12 so that the shrunk gradients stay far above it and fp32 trains
  exactly as with the unshrunk loss. The per-step loss, skipped and clipped steps, zeroed-gradient steps and
  the scaled/unscaled norm ratio are rows.
"""

from __future__ import annotations

import math

import torch

from suite.results import Row
from suite.workloads.gpt import build_model, loss_fn, synthetic_batch

STAGE = "precision"
AUTOCAST = {
    "fp32": None,
    "bf16": torch.bfloat16,
    "fp16_unscaled": torch.float16,
    "fp16_scaler": torch.float16,
}
"""The training runs, by name → the autocast dtype (None: plain fp32)."""
PROBE_DTYPES = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}
FP16_MAX = 65504.0


def _grads(model) -> list[torch.Tensor]:
    return [
        p.grad.detach().clone() if p.grad is not None else torch.zeros_like(p) for p in model.parameters()
    ]


def backward_grads(cfg, device, dtype, factor: float) -> list[torch.Tensor]:
    """The gradients of one backward pass of the model on batch 0, loss × factor, under autocast to dtype."""
    model = build_model(cfg, device)
    tokens, targets = synthetic_batch(cfg, 0, device=device)
    with torch.autocast(device.type, dtype=dtype or torch.float32, enabled=dtype is not None):
        loss = loss_fn(model(tokens), targets)
    (loss * factor).backward()
    return _grads(model)


def range_counts(reference: list[torch.Tensor], grads: list[torch.Tensor]) -> dict[str, int]:
    """Elements zeroed (reference ≠ 0, here 0), non-finite, and in all."""
    zeroed = sum(int(((r != 0) & (g == 0)).sum()) for r, g in zip(reference, grads))
    nonfinite = sum(int((~torch.isfinite(g)).sum()) for g in grads)
    return {
        "grads_zeroed": zeroed,
        "grads_nonfinite": nonfinite,
        "grads_total": sum(g.numel() for g in grads),
    }


def probe_rows(cfg, device, pc) -> list[Row]:
    out = []
    for case, log2 in (("probe.underflow", pc.grad_shrink_log2), ("probe.overflow", pc.overflow_log2)):
        reference = backward_grads(cfg, device, None, 2.0**log2)
        ref_max = max(float(r.abs().max()) for r in reference)
        # the factor's exponent is a row of its own: the `count` column is elements per buffer, never negative
        out.append(
            Row(
                stage=STAGE,
                case=case,
                metric="grad_factor_log2",
                value=float(log2),
                unit="ratio",
                dtype="fp32",
            )
        )
        out.append(
            Row(
                stage=STAGE,
                case=case,
                metric="reference_max_abs_grad",
                value=ref_max,
                unit="ratio",
                dtype="fp32",
            )
        )
        for name, dtype in PROBE_DTYPES.items():
            grads = reference if dtype is None else backward_grads(cfg, device, dtype, 2.0**log2)
            for metric, value in range_counts(reference, grads).items():
                out.append(
                    Row(stage=STAGE, case=case, metric=metric, value=float(value), unit="count", dtype=name)
                )
    return out


def train(cfg, device, pc, run: str, *, use_scaler: bool | None = None) -> list[Row]:
    """One training run; `use_scaler` (default: run == "fp16_scaler") is the switch a test flips to show an
    unscaled fp16 run is caught."""
    dtype = AUTOCAST[run]
    use_scaler = run == "fp16_scaler" if use_scaler is None else use_scaler
    shrink = 2.0**pc.grad_shrink_log2
    model = build_model(cfg, device)
    opt = torch.optim.AdamW(model.parameters(), lr=pc.lr, eps=1e-12, weight_decay=0.0)
    scaler = torch.amp.GradScaler(
        device.type,
        init_scale=2.0**pc.init_scale_log2,
        growth_interval=pc.growth_interval,
        enabled=use_scaler,
    )
    rows: list[Row] = []
    skipped = clipped = zero_steps = 0
    ratio = ratio_scale = math.nan
    for step in range(pc.steps):
        tokens, targets = synthetic_batch(cfg, step % pc.batches, device=device)
        with torch.autocast(device.type, dtype=dtype or torch.float32, enabled=dtype is not None):
            loss = loss_fn(model(tokens), targets)
        scaler.scale(loss * shrink).backward()
        scale = scaler.get_scale() if use_scaler else 1.0
        if use_scaler and math.isnan(ratio):
            scaled_norm = float(torch.stack([g.float().norm() for g in _grads(model)]).norm())
        scaler.unscale_(opt)  # clip the true gradients: clipping scaled ones clips at clip_norm / scale
        norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), pc.clip_norm * shrink))
        if (
            use_scaler
            and math.isnan(ratio)
            and math.isfinite(scaled_norm)
            and math.isfinite(norm)
            and norm > 0
        ):
            ratio, ratio_scale = scaled_norm / norm, scale  # the first step whose scaled gradients are finite
        if math.isfinite(norm) and norm > pc.clip_norm * shrink:
            clipped += 1
        if all(p.grad is None or not bool(p.grad.any()) for p in model.parameters()):
            zero_steps += 1
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)
        if use_scaler and scaler.get_scale() < scale:
            skipped += 1
        rows.append(
            Row(
                stage=STAGE,
                case="train",
                metric="loss",
                value=float(loss.detach()),
                unit="ratio",
                dtype=run,
                repeat=step,
            )
        )
        rows.append(
            Row(
                stage=STAGE,
                case="train",
                metric="grad_norm",
                value=norm / shrink,
                unit="ratio",
                dtype=run,
                repeat=step,
            )
        )
    for metric, value in (
        ("skipped_steps", skipped),
        ("clipped_steps", clipped),
        ("zero_grad_steps", zero_steps),
        ("steps", pc.steps),
    ):
        rows.append(
            Row(stage=STAGE, case="train", metric=metric, value=float(value), unit="count", dtype=run)
        )
    if use_scaler:
        rows.append(
            Row(stage=STAGE, case="train", metric="scaled_norm_ratio", value=ratio, unit="ratio", dtype=run)
        )
        rows.append(
            Row(
                stage=STAGE, case="train", metric="scale_at_ratio", value=ratio_scale, unit="ratio", dtype=run
            )
        )
        rows.append(
            Row(
                stage=STAGE,
                case="train",
                metric="final_scale",
                value=scaler.get_scale(),
                unit="ratio",
                dtype=run,
            )
        )
    return rows


def precision_rows(cfg, device, pc, say=lambda message: None) -> list[Row]:
    """The probe and the four training runs."""
    rows = probe_rows(cfg, device, pc)
    for run in AUTOCAST:
        say(f"{run}: {pc.steps} steps")
        rows += train(cfg, device, pc, run)
    return rows
