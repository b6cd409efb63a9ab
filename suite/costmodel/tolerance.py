"""How far a partitioned result may stray from one process's (no torch: judge() and expect() use it).

The golden comparisons (suite/workloads/golden.py) run in CHECK_DTYPE whatever dtype the timings use,
and record max |partitioned − single-process| over every element. They are judged against

    |Δ| ≤ atol + rtol · scale                                     (golden_tolerance)

derived, not calibrated, so that it follows the model's size, the dtype and the number of steps:
  * u, the dtype's unit roundoff (float32 2⁻²⁴ ≈ 6.0e-8, bfloat16 2⁻⁸): one rounding's relative error.
  * A partitioned run sums the same terms in another order. A sum of K terms rounded at each step
    differs by ≈ √K·u relative (round-off errors add like a random walk; Higham, "Accuracy and Stability
    of Numerical Algorithms", §4.2). K is the longest sum in the model: the MLP's inner dimension
    (mlp_ratio·d), the softmax over the vocabulary (V), or a weight gradient summed over the batch's
    tokens (B·T) — whichever is largest.
  * A value passes through depth = 2L + 2 such reductions (per block attention and MLP, forward and
    backward, plus the embedding and the head), and the differences add: one pass costs depth·√K·u.
  * Each optimizer step feeds a perturbed gradient into the next forward: after `steps` AdamW steps
    the parameters carry (1 + steps) passes' worth: rtol = depth·√K·u·(1 + steps).
  * atol covers elements whose reference is near zero: AdamW moves every parameter by at most lr per
    step whatever its gradient's size, so a relative gradient difference r moves it by ≤ lr·r:
    atol = lr·steps·depth·√K·u.
  * scale is the magnitude of the compared values: 1 for parameters, activations and gradients of a
    pre-norm model (LayerNorm weights start at 1), ln V for the loss.
The gloo rehearsal's 41 K-parameter model (K = 256, depth 6, 4 steps) gets 2.9e-5 where its measured
noise is 2.4e-7 (TP forward) and 3.7e-8 (three AdamW steps under FSDP2), and its injected mistakes are
≥ 1e-3; the nccl-gpu model (K = 32768, depth 18, 13 steps) gets 2.7e-3, where a rank training on the
wrong slice of the batch moves parameters by ~lr per step (1.3e-2 after 13 steps).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from suite.config import GptConfig

CHECK_DTYPE = "float32"

UNIT_ROUNDOFF: dict[str, float] = {
    "float64": 2.0**-53,
    "float32": 2.0**-24,
    "float16": 2.0**-11,
    "bfloat16": 2.0**-8,
}
LEARNING_RATE = 1e-3
"""AdamW's learning rate in suite/workloads/training.py: the most one step moves a parameter."""

# Largest accepted |Δ| per dtype for the overlap stage's gradient comparison (DDP against one process,
# values of order one). float32: 400× the noise measured on gloo, 10× below the smallest mistake the
# tests inject. bf16 has 8 mantissa bits (ulp 2⁻⁸ ≈ 0.004 at 1.0): several ulps after another order.
TOLERANCE: dict[str, float] = {
    "float64": 1e-10,
    "float32": 1e-4,
    "float16": 5e-3,
    "bfloat16": 3e-2,
}


@dataclass(frozen=True)
class Tolerance:
    """|Δ| ≤ atol + rtol·scale, and how it was derived."""

    rtol: float
    atol: float
    scale: float
    derivation: str

    @property
    def bound(self) -> float:
        """The largest accepted max |Δ|."""
        return self.atol + self.rtol * self.scale

    def describe(self) -> str:
        return (
            f"atol {self.atol:.2g} + rtol {self.rtol:.2g} × {self.scale:.3g} = {self.bound:.2g} "
            f"({self.derivation})"
        )


def _per_dtype(table: dict[str, float], name: str, dtype: str) -> float:
    """table[dtype], or a ValueError naming the table to extend."""
    try:
        return table[dtype]
    except KeyError:
        raise ValueError(f"no value stated for dtype {dtype!r}: add it to {name} in {__name__}") from None


def unit_roundoff(dtype: str) -> float:
    return _per_dtype(UNIT_ROUNDOFF, "UNIT_ROUNDOFF", dtype)


def golden_tolerance(cfg: GptConfig, steps: int, dtype: str = CHECK_DTYPE, scale: float = 1.0) -> Tolerance:
    """The tolerance of a golden comparison of `cfg`'s model after `steps` optimizer steps, run in `dtype`."""
    u = unit_roundoff(dtype)
    k = max(cfg.mlp_ratio * cfg.hidden, cfg.vocab, cfg.batch * cfg.seq_len)
    depth = 2 * cfg.layers + 2
    one_pass = depth * math.sqrt(k) * u
    rtol = one_pass * (1 + steps)
    atol = LEARNING_RATE * steps * one_pass
    return Tolerance(
        rtol=rtol,
        atol=atol,
        scale=scale,
        derivation=f"{dtype} u = {u:.2g}, longest sum K = {k}, depth 2L+2 = {depth}, {steps} steps: "
        f"rtol = depth·√K·u·(1+steps), atol = lr·steps·depth·√K·u",
    )


def tolerance(dtype: str) -> float:
    """The overlap stage's gradient tolerance in `dtype` (a torch dtype name); golden checks use
    golden_tolerance."""
    return _per_dtype(TOLERANCE, "TOLERANCE", dtype)
