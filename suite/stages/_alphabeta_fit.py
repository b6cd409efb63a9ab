"""α and β fitted from all_reduce timing rows: shared by the bandwidth stage (which publishes the fit
as facts['alpha_beta']) and the crossover stage (which fits the hand ring and tree the same way).

A helper module, not a stage: stages import it, never each other.
"""

from __future__ import annotations

import dataclasses
import math

from suite.costmodel.alphabeta import fit_alpha_beta
from suite.facts import FittedAlphaBeta
from suite.results import Row


def fit_rows(
    rows: list[Row],
    world: int,
    stage: str = "bandwidth",
    case: str = "all_reduce",
    algo: str = "ring",
    match_algo: str | None = None,
) -> list[Row]:
    """α, β and the fit's residual per source, from all_reduce time_us rows
    (in-place for torch and the hand algorithms, out-of-place for nccl-tests)."""
    out = []
    for source, placement in (("torch", "ip"), ("nccl-tests", "oop"), ("hand", "ip")):
        pts = sorted(
            (r.size_bytes, r.value * 1e-6)
            for r in rows
            if r.case == case
            and r.metric == "time_us"
            and r.source == source
            and r.placement == placement
            and r.algo == match_algo
            and r.size_bytes
            and r.value > 0
            and math.isfinite(r.value)
        )
        if len({p[0] for p in pts}) < 2:
            continue
        n = next((r.world for r in rows if r.source == source and r.world), world)
        if n < 2:  # one rank sends nothing: t = 2(n−1)(α + S/(nβ)) has no α or β to fit
            continue
        fit = fit_alpha_beta("all_reduce", n, [p[0] for p in pts], [p[1] for p in pts], algo=algo)
        common = dict(stage=stage, case=f"fit.{case}", source=source, world=n, algo=algo)
        out += [
            Row(metric="alpha", value=fit.alpha_s * 1e6, unit="us", **common),
            Row(metric="beta", value=fit.beta_Bps / 1e9, unit="GB/s", **common),
            Row(metric="rms_rel_residual", value=fit.rms_rel_residual, unit="ratio", **common),
            Row(metric="points", value=fit.points, unit="count", **common),
        ]
    return out


def pick_fit(fits: list[Row]) -> FittedAlphaBeta | None:
    """The fit later stages use: nccl-tests' where present (the library at its best), else torch's."""
    for source in ("nccl-tests", "torch"):
        got = {r.metric: r for r in fits if r.source == source}
        # a slope ≤ 0 (noise swamping the sizes) gives β = ∞: no use to the stages that divide by it
        if "alpha" in got and math.isfinite(got["beta"].value) and got["beta"].value > 0:
            return FittedAlphaBeta(
                alpha_s=got["alpha"].value * 1e-6,
                beta_Bps=got["beta"].value * 1e9,
                rms_rel_residual=got["rms_rel_residual"].value,
                source=source,
                world=got["alpha"].world,
                points=int(got["points"].value),
            )
    return None


def fit_and_pick(
    rows: list[Row], world: int, nccl_tests_form: str | None = None
) -> tuple[list[Row], FittedAlphaBeta | None]:
    """fit_rows then pick_fit: the fit rows, and the fit later stages use, naming which form of nccl-tests
    measured it where it was nccl-tests' (the bandwidth stage's fit across the world, and each node's own)."""
    fits = fit_rows(rows, world)
    best = pick_fit(fits)
    if best is not None and best.source == "nccl-tests" and nccl_tests_form:
        best = dataclasses.replace(best, nccl_tests_form=nccl_tests_form)
    return fits, best
