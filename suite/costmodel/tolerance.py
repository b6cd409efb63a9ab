"""How far a partitioned result may stray from one process's, per dtype (no torch: judge() and expect() use it).

The golden comparisons (suite/workloads/golden.py) run in CHECK_DTYPE whatever dtype the timings use.
"""

from __future__ import annotations

CHECK_DTYPE = "float32"

# Largest accepted |partitioned − single-process| per dtype. float32: 400× the noise measured on
# gloo, 10× below the smallest mistake the tests inject. bf16 has 8 mantissa bits (ulp 2⁻⁸ ≈ 0.004
# at 1.0), so values of order one may differ by several ulps after a different reduction order.
TOLERANCE: dict[str, float] = {
    "float64": 1e-10,
    "float32": 1e-4,
    "float16": 5e-3,
    "bfloat16": 3e-2,
}


def tolerance(dtype: str) -> float:
    """The tolerance of a comparison run in `dtype` (a torch dtype name)."""
    try:
        return TOLERANCE[dtype]
    except KeyError:
        raise ValueError(f"no tolerance stated for dtype {dtype!r}: add it to TOLERANCE in {__name__}") from None
