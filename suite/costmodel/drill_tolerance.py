"""Golden tolerances of the cp and ep drills, derived the way suite/costmodel/tolerance.py derives the
model's (no torch: judge() and expect() use it).

Same rule, |Δ| ≤ atol + rtol·scale with rtol = depth·√K·u: u the dtype's unit roundoff, K the longest
sum, depth the number of reductions a value passes through whose order the partitioning changes.
  * Attention (cp): K = max(S, D) (the softmax and P·V sum over the S keys, q·k over D); depth =
    2·(3 + P): forward and backward, each three sums plus one log-sum-exp merge per ring step.
    Measured on gloo (S = 64, P = 4, float32): ≤ 1.3e-6 (dv, causal ring); the bound is 6.7e-6; every
    injected mistake moves values by ≥ 0.4. The LSE is of order ln S: its scale.
  * Mixture of experts (ep): K = max(ffn, hidden, n) with n = P·T·k/E the assignments an expert gets
    (its matmuls; a weight gradient sums over its tokens); depth 4: two matmuls, forward and backward.
    Outputs and input gradients are of order one (scale 1); a weight gradient sums n terms of order
    one, so its scale is √n (the router's: √(P·T)). Measured on gloo (T = 32, P = 4, E = 8):
    ≤ 2.9e-6 (dw2), bound 1.5e-5; every injected mistake ≥ 2.
No optimizer step follows, so atol is 0.
"""

from __future__ import annotations

import math

from suite.costmodel.tolerance import CHECK_DTYPE, Tolerance, unit_roundoff


def attention_tolerance(
    seq_len: int, head_dim: int, cp: int, dtype: str = CHECK_DTYPE, scale: float = 1.0
) -> Tolerance:
    """Attention over S = seq_len split over `cp` ranks, against one process's, in `dtype`."""
    u = unit_roundoff(dtype)
    k = max(seq_len, head_dim)
    depth = 2 * (3 + cp)
    return Tolerance(
        rtol=depth * math.sqrt(k) * u,
        atol=0.0,
        scale=scale,
        derivation=f"{dtype} u = {u:.2g}, K = max(S, D) = {k}, depth 2·(3+P) = {depth}: rtol = depth·√K·u",
    )


def lse_scale(seq_len: int) -> float:
    """The magnitude of a log-sum-exp over seq_len keys of unit-variance scores: ln S + 1."""
    return math.log(seq_len) + 1.0


def moe_tolerance(
    hidden: int, ffn: int, per_expert: int, dtype: str = CHECK_DTYPE, scale: float = 1.0
) -> Tolerance:
    """The experts' output and gradients under expert parallelism, against one process's, in `dtype`;
    per_expert = P·T·k/E, the assignments an expert gets on average."""
    u = unit_roundoff(dtype)
    k = max(hidden, ffn, per_expert)
    depth = 4
    return Tolerance(
        rtol=depth * math.sqrt(k) * u,
        atol=0.0,
        scale=scale,
        derivation=f"{dtype} u = {u:.2g}, K = max(ffn, hidden, P·T·k/E) = {k}, depth {depth}: "
        f"rtol = depth·√K·u",
    )
