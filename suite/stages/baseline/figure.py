"""Baseline figure: the one-device step beside what the model predicts — peak memory against the
model state (parameters, gradients, AdamW moments), and on a GPU the MFU against its floor."""

from __future__ import annotations

from matplotlib.figure import Figure

from reports.figures._plot import finish, limit, new_figure, style
from reports.figures._scaling import series
from suite.values import is_finite_number

FACTS: tuple[str, ...] = ()
"""The facts these figures read (of the manifest's facts and the profile): the figure cache's key holds only
these."""


def figures(rows, expectations, facts) -> list[Figure]:
    if rows is None or not len(rows):
        return []
    step = series(rows, "step_time_s", "tp").get(1)
    tokens = series(rows, "tokens_per_s", "tp").get(1)
    peak = series(rows, "peak_memory_bytes", "tp").get(1)
    if step is None:
        return []
    state = series(expectations, "model_state_bytes", "tp").get(1)
    mfu = series(rows, "mfu", "tp").get(1)
    fig, (left, right) = new_figure(8, 3.6, 1, 2)
    labels, values = ["measured peak"], [(peak or 0) / 2**20]
    if state is not None:
        labels.append("model state (expected)")
        values.append(state / 2**20)
    left.bar(labels, values, color=["tab:blue", "tab:grey"][: len(values)])
    style(left, title="Memory of one device", ylabel="MiB", grid=None, legend=None)
    mfu_floor = series(expectations, "mfu", "tp").get(1)
    if is_finite_number(mfu):
        right.bar(["MFU"], [mfu * 100], color="tab:green")
        if mfu_floor:
            limit(right, mfu_floor * 100, f"floor {mfu_floor:.0%}")
        style(
            right,
            title="Model FLOPs utilisation",
            ylabel="% of bf16 dense peak",
            grid=None,
            legend=7 if mfu_floor else None,
        )
    else:
        right.axis("off")
        right.text(
            0.0,
            0.5,
            f"step {step * 1e3:.3g} ms\n{tokens:,.0f} tokens/s\n(no MFU: no GPU peak)",
            fontsize=11,
            va="center",
        )
    return [
        finish(
            fig,
            f"Baseline, TP=1: {step * 1e3:.3g} ms per step, {tokens:,.0f} tokens/s",
            "Good: on a GPU an MFU at or above the red 20% floor (of the card's bf16 dense peak); this "
            "one-card step is what every scaling figure divides by.",
        )
    ]
