"""What the scaling stages (baseline, tp, dp, zero) expect before they run: pure arithmetic, no torch.

    dp_efficiency(step_1_s=0.070, n=8, grad_bytes=1.07e9, alpha_s=5e-6, beta_Bps=200e9)   # → 0.44

Data parallelism with a fixed global batch: one rank's step takes t₁ on the whole batch, so n
ranks compute t₁/n each and then all-reduce every gradient once (the α-β ring, unoverlapped):
    step(n) = t₁/n + 2(n−1)(α + G/(nβ))
Per-rank throughput relative to one rank is then (t₁/n) / step(n): the decay the α-β model
allows. Overlapping the all-reduce with the backward only makes the measured figure better.
"""

from __future__ import annotations

from suite.costmodel.alphabeta import dp_step_comm_s, zero_memory_bytes
from suite.dtypes import DTYPE_BYTES

MFU_FLOOR = 0.20
"""Below this fraction of the card's bf16 dense peak, baseline MFU is 'far below' what the card allows.
A d=2048, 8-layer model at 8,192 tokens per step reaches 35–50% with eager PyTorch and SDPA."""
DP_MARGIN = 0.80
"""DP per-rank throughput ratio below this fraction of the α-β model's prediction warns."""
ZERO3_SLOWDOWN = 1.5
"""ZeRO-3 step time above this multiple of DDP's warns (the parameter all-gather not overlapping)."""


def dp_step_s(step_1_s: float, n: int, grad_bytes: float, alpha_s: float, beta_Bps: float) -> float:
    """Predicted DDP step time on n ranks with a fixed global batch: t₁/n + one ring all-reduce of the
    gradients."""
    return step_1_s / n + dp_step_comm_s(grad_bytes, n, alpha_s, beta_Bps)


def dp_efficiency(step_1_s: float, n: int, grad_bytes: float, alpha_s: float, beta_Bps: float) -> float:
    """Predicted per-rank throughput on n ranks ÷ one rank's: (t₁/n) / step(n); 1.0 at n = 1."""
    step = dp_step_s(step_1_s, n, grad_bytes, alpha_s, beta_Bps)
    return (step_1_s / n) / step if step > 0 else float("nan")


def model_state_bytes(params: int, n: int, zero: int, dtype: str) -> float:
    """Model-state memory per rank under ZeRO stage `zero` for AdamW whose state lives in the parameter dtype.

    Parameters and gradients in `dtype`, AdamW's two moments in `dtype` too (no master copy):
    float32 → 4 + 4 + 8 = 16Ψ bytes; bfloat16 → 2 + 2 + 4 = 8Ψ. ZeRO-1 divides the optimizer
    state by n, ZeRO-2 also the gradients, ZeRO-3 everything (suite.costmodel.alphabeta.zero_memory_bytes).
    """
    b = DTYPE_BYTES[dtype]
    return zero_memory_bytes(params, n, zero, param_bytes=b, grad_bytes=b, optimizer_bytes=2 * b)
