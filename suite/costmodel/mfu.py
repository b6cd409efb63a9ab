"""Model FLOPs utilisation (MFU): achieved model FLOP/s against the card's peak, numbers in, a ratio out.

    mfu(flops_per_token=3.42e9, tokens_per_s=1.2e5, peak_flops=989.4e12)   # → 0.415

The peaks themselves (bf16 dense, per GPU model, with their datasheet sources) live in suite/hardware/gpus.py.
"""

from __future__ import annotations

import math


def mfu(flops_per_token: float, tokens_per_s: float, peak_flops: float) -> float:
    """Model FLOPs utilisation: achieved model FLOP/s ÷ peak FLOP/s (a fraction, not %).

    Achieved = FLOPs per trained token × tokens per second; e.g. 3.02 GFLOP/token × 120,000
    tokens/s = 362 TFLOP/s, ÷ 989.4 TFLOP/s = 0.366. NaN when the peak is unknown (≤ 0 or NaN).
    """
    if not peak_flops or math.isnan(peak_flops) or peak_flops <= 0:
        return float("nan")
    return flops_per_token * tokens_per_s / peak_flops
