"""Overlap figures: step time per DDP mode beside no overlap, and the measured saving against the
α-β prediction of the communication hidden under backward."""

from __future__ import annotations

import math

from matplotlib.figure import Figure

from suite.values import is_missing

from ._plot import finish, grouped_bars, new_figure, style

NO_OVERLAP = "no_overlap"


def _mode_order(rows) -> list[str]:
    """no_overlap first, then bucketed modes by bucket size."""
    labels = [m for m in dict.fromkeys(rows["overlap"].dropna()) if m]

    def key(label: str) -> tuple[int, float]:
        if label == NO_OVERLAP:
            return (0, 0.0)
        try:
            return (1, float(label.removeprefix("bucket_").removesuffix("MB")))
        except ValueError:
            return (2, 0.0)

    return sorted(labels, key=key)


def _value(rows, label: str, metric: str) -> float:
    part = rows[(rows["overlap"] == label) & (rows["metric"] == metric)]
    return float(part["value"].iloc[0]) if len(part) else math.nan


def figures(rows, expectations, facts) -> list[Figure]:
    if rows is None or not len(rows) or "overlap" not in rows:
        return []
    labels = _mode_order(rows[rows["metric"] == "step_time_s"])
    if not labels:
        return []
    return [step_figure(rows, labels), saving_figure(rows, labels)]


def step_figure(rows, labels: list[str]) -> Figure:
    fig, ax = new_figure(7, 4)
    steps = [_value(rows, m, "step_time_s") * 1e3 for m in labels]
    colors = ["tab:grey" if m == NO_OVERLAP else "tab:blue" for m in labels]
    bars = ax.bar(labels, steps, color=colors)
    for bar, label in zip(bars, labels):
        buckets = _value(rows, label, "buckets")
        diff = _value(rows, label, "max_grad_diff")
        note = (f"{buckets:.0f} buckets\n" if not is_missing(buckets) else "") + (
            f"Δgrad {diff:.1e}" if not is_missing(diff) else "")
        ax.annotate(note, (bar.get_x() + bar.get_width() / 2, bar.get_height()), ha="center", va="bottom", fontsize=7)
    base = _value(rows, NO_OVERLAP, "step_time_s") * 1e3
    if not is_missing(base):
        ax.axhline(base, color="tab:grey", linestyle=":", label="no overlap")
    style(ax, title="DDP step time by overlap mode (Δgrad: max |grad − one process's|)",
          ylabel="step time (ms, median, slowest rank)", grid="y", legend=None if is_missing(base) else 8)
    return finish(fig, caption="Good: the overlapped modes' bars below the no-overlap line, with Δgrad at float32 "
                               "rounding.")


def saving_figure(rows, labels: list[str]) -> Figure:
    overlapped = [m for m in labels if m != NO_OVERLAP]
    fig, ax = new_figure(7, 4)
    fig.caption = "Good: the measured saving positive and near the α-β estimate of the communication it hides."
    x = range(len(overlapped))
    saved = [_value(rows, m, "step_time_saving_s") * 1e3 for m in overlapped]
    hidden = [_value(rows, m, "predicted_hidden_comm_s") * 1e3 for m in overlapped]
    grouped_bars(ax, x, [("measured: no overlap − mode", saved, "tab:blue"),
                         ("α-β: communication hidden", hidden, "tab:orange")], width=0.4)
    ax.axhline(0, color="black", linewidth=0.8)
    style(ax, title="Time saved by overlapping, measured and predicted", ylabel="ms per step", xticks=x,
          xticklabels=overlapped, grid="y", legend=8)
    return finish(fig)
