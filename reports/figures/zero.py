"""ZeRO figures: memory per rank for DDP and ZeRO-1/2/3 — measured peak, measured model state, and
the model's expected state bytes side by side — with each stage's step time; then the golden comparison."""

from __future__ import annotations

from matplotlib.figure import Figure

from suite.costmodel.scaling_expectations import ZERO3_SLOWDOWN

from ._plot import finish, grouped_bars, limit, new_figure, style
from ._scaling import golden_figure, series

FACTS: tuple[str, ...] = ()
"""The facts these figures read (of the manifest's facts and the profile): the figure cache's key holds only these."""

NAMES = {0: "DDP", 1: "ZeRO-1", 2: "ZeRO-2", 3: "ZeRO-3"}


def figures(rows, expectations, facts) -> list[Figure]:
    if rows is None or not len(rows):
        return []
    out = []
    peak = series(rows, "peak_memory_bytes", "zero")
    state = series(rows, "state_memory_bytes", "zero")
    model = series(expectations, "state_memory_bytes", "zero")
    steps = series(rows, "step_time_s", "zero")
    stages = sorted(set(peak) | set(state) | set(model))
    if stages:
        fig, (left, right) = new_figure(10, 3.8, 1, 2, gridspec_kw={"width_ratios": [3, 2]})
        grouped_bars(left, range(len(stages)), [
            (label, [values.get(z, 0) / 2**20 for z in stages], color)
            for label, values, color in (("measured peak", peak, "tab:blue"),
                                         ("measured model state", state, "tab:cyan"),
                                         ("expected model state", model, "tab:grey"))], width=0.27)
        style(left, title="Memory per rank", ylabel="MiB per rank", xticks=range(len(stages)),
              xticklabels=[NAMES.get(z, str(z)) for z in stages], grid="y")
        if steps:
            right.bar([NAMES.get(z, str(z)) for z in steps], [v * 1e3 for v in steps.values()], color="tab:purple")
            if 0 in steps:
                limit(right, steps[0] * 1e3 * ZERO3_SLOWDOWN, f"{ZERO3_SLOWDOWN:g} × DDP")
        style(right, title="Step time", ylabel="ms per step", grid=None,
              legend=7 if steps and 0 in steps else None)
        out.append(finish(fig, "ZeRO: memory per rank beside the model, and step time",
                          "Good: memory per rank falling with each ZeRO stage as the model predicts, at a modest "
                          "step-time cost."))
    golden = golden_figure(rows, expectations, "zero", "ZeRO",
                           "ZeRO: parameters after AdamW steps vs one process (ZeRO=0 is DDP)")
    return out + ([golden] if golden else [])
