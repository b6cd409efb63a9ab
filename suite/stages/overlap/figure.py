"""Overlap figures: step time per DDP mode beside no overlap, the measured saving against the
α-β prediction of the communication hidden under backward, and the watched buckets' timeline: one row per
bucket (launch to completion, its last gradient marked) in front of the backward layers."""

from __future__ import annotations

import math

from matplotlib.figure import Figure

from reports.figures._plot import finish, grouped_bars, new_figure, style
from suite.values import is_missing

FACTS: tuple[str, ...] = ()
"""The facts these figures read (of the manifest's facts and the profile): the figure cache's key holds only
these."""

NO_OVERLAP = "no_overlap"
BUCKET_CASE = "watch.bucket."  # as suite/stages/overlap/ddp_watch.py writes them
LAYER_CASE = "watch.layer."


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
    figs = [step_figure(rows, labels), saving_figure(rows, labels)]
    watched = [
        m
        for m in labels
        if m != NO_OVERLAP
        and (rows["case"].astype(str).str.startswith(BUCKET_CASE) & (rows["overlap"] == m)).any()
    ]
    if watched:
        figs.append(timeline_figure(rows, watched))
    return figs


def step_figure(rows, labels: list[str]) -> Figure:
    fig, ax = new_figure(7, 4)
    steps = [_value(rows, m, "step_time_s") * 1e3 for m in labels]
    colors = ["tab:grey" if m == NO_OVERLAP else "tab:blue" for m in labels]
    bars = ax.bar(labels, steps, color=colors)
    for bar, label in zip(bars, labels):
        buckets = _value(rows, label, "buckets")
        diff = _value(rows, label, "max_grad_diff")
        note = (f"{buckets:.0f} buckets\n" if not is_missing(buckets) else "") + (
            f"Δgrad {diff:.1e}" if not is_missing(diff) else ""
        )
        ax.annotate(
            note, (bar.get_x() + bar.get_width() / 2, bar.get_height()), ha="center", va="bottom", fontsize=7
        )
    base = _value(rows, NO_OVERLAP, "step_time_s") * 1e3
    if not is_missing(base):
        ax.axhline(base, color="tab:grey", linestyle=":", label="no overlap")
    style(
        ax,
        title="DDP step time by overlap mode (Δgrad: max |grad − one process's|)",
        ylabel="step time (ms, median, slowest rank)",
        grid="y",
        legend=None if is_missing(base) else 8,
    )
    return finish(
        fig,
        caption="Good: the overlapped modes' bars below the no-overlap line, with Δgrad at float32 rounding.",
    )


def saving_figure(rows, labels: list[str]) -> Figure:
    overlapped = [m for m in labels if m != NO_OVERLAP]
    fig, ax = new_figure(7, 4)
    fig.caption = (
        "Good: the measured saving positive and near the α-β estimate of the communication it hides."
    )
    x = range(len(overlapped))
    saved = [_value(rows, m, "step_time_saving_s") * 1e3 for m in overlapped]
    hidden = [_value(rows, m, "predicted_hidden_comm_s") * 1e3 for m in overlapped]
    grouped_bars(
        ax,
        x,
        [
            ("measured: no overlap − mode", saved, "tab:blue"),
            ("α-β: communication hidden", hidden, "tab:orange"),
        ],
        width=0.4,
    )
    ax.axhline(0, color="black", linewidth=0.8)
    style(
        ax,
        title="Time saved by overlapping, measured and predicted",
        ylabel="ms per step",
        xticks=x,
        xticklabels=overlapped,
        grid="y",
        legend=8,
    )
    return finish(fig)


def _watch(rows, label: str, prefix: str, metrics: tuple[str, ...]) -> list[dict]:
    """Per bucket (or layer) of one mode, in index order: {metric: value, "text": …}."""
    part = rows[(rows["overlap"] == label) & rows["case"].astype(str).str.startswith(prefix)]
    out: dict[int, dict] = {}
    for _, r in part.iterrows():
        entry = out.setdefault(int(str(r["case"]).removeprefix(prefix)), {})
        if r["metric"] in metrics:
            entry[r["metric"]] = float(r["value"])
        if isinstance(r.get("text"), str) and r["text"]:
            entry.setdefault("text", r["text"])
    return [out[i] for i in sorted(out)]


def timeline_figure(rows, labels: list[str]) -> Figure:
    """Per mode: each bucket's all-reduce from launch to completion (its last gradient a dot), the backward
    layers shaded behind, in ms since backward began on rank 0's clock."""
    counts = [len(_watch(rows, m, BUCKET_CASE, ("bucket_launch_s",))) for m in labels]
    fig, axes = new_figure(
        8,
        1.2 + sum(0.35 * c + 0.9 for c in counts),
        rows=len(labels),
        squeeze=False,
        gridspec_kw={"height_ratios": [c + 2 for c in counts]},
    )
    for ax, label in zip(axes[:, 0], labels):
        buckets = _watch(
            rows, label, BUCKET_CASE, ("bucket_ready_s", "bucket_launch_s", "bucket_done_s", "bucket_bytes")
        )
        layers = _watch(rows, label, LAYER_CASE, ("layer_grad_first_s", "layer_grad_last_s"))
        start = 0.0
        # a layer's backward: from the previous layer's last gradient to its own
        for i, layer in enumerate(layers):
            end = layer.get("layer_grad_last_s", math.nan) * 1e3
            if not is_missing(end):
                ax.axvspan(start, end, color="tab:grey", alpha=0.12 if i % 2 else 0.25, linewidth=0)
                ax.annotate(
                    layer.get("text", ""),
                    ((start + end) / 2, len(buckets) - 0.4),
                    ha="center",
                    va="bottom",
                    fontsize=6,
                    color="dimgrey",
                    rotation=90 if len(layers) > 6 else 0,
                )
                start = end
        for y, b in enumerate(buckets):
            launch, done = b.get("bucket_launch_s", math.nan) * 1e3, b.get("bucket_done_s", math.nan) * 1e3
            if not (is_missing(launch) or is_missing(done)):
                ax.barh(
                    y,
                    done - launch,
                    left=launch,
                    height=0.6,
                    color="tab:blue",
                    label="all-reduce (launch → completion)" if y == 0 else None,
                )
            ready = b.get("bucket_ready_s", math.nan) * 1e3
            if not is_missing(ready):
                ax.plot(
                    [ready],
                    [y],
                    marker="o",
                    color="tab:orange",
                    markersize=4,
                    linestyle="none",
                    label="its last gradient" if y == 0 else None,
                )
        if not is_missing(start) and layers:
            ax.axvline(start, color="black", linestyle=":", linewidth=1, label="last gradient of backward")
        ax.set_ylim(-0.6, len(buckets) + 0.8)
        ax.invert_yaxis()
        ticks = [f"{i}: {b.get('bucket_bytes', math.nan) / 1024:.0f} KiB" for i, b in enumerate(buckets)]
        style(
            ax,
            title=f"{label}: buckets in all-reduce order, backward layers behind",
            xlabel="ms since backward began",
            grid="x",
            legend=7,
            loc="lower right",
        )
        ax.set_yticks(range(len(buckets)), ticks, fontsize=7)
    return finish(
        fig,
        "DDP's buckets watched (rank 0; one backward after the rebuild)",
        "Good: each bucket's all-reduce starting as soon as its layers' gradients are ready and all but the "
        "last ending before the dotted end of backward (hidden).",
    )
