"""Crossover figure: all-reduce time of ring and tree over message size — the hand algorithms, NCCL pinned
to Ring and Tree where measured, the α-β model's ring and tree dashed — with the measured and predicted
crossover sizes as vertical lines."""

from __future__ import annotations

from matplotlib.figure import Figure

from reports.figures._plot import finish, measured, model, new_figure, style
from suite.values import is_finite_number

FACTS: tuple[str, ...] = ()
"""The facts these figures read (of the manifest's facts and the profile): the figure cache's key holds only
these."""

CURVES = (
    ("hand", "ring", "hand ring"),
    ("hand", "tree", "hand tree"),
    ("torch", "library", "dist.all_reduce"),
    ("torch", "Ring", "torch NCCL_ALGO=Ring"),
    ("torch", "Tree", "torch NCCL_ALGO=Tree"),
    ("nccl-tests", "Ring", "nccl-tests Ring"),
    ("nccl-tests", "Tree", "nccl-tests Tree"),
)


def figures(rows, expectations, facts) -> list[Figure]:
    if rows is None or not len(rows):
        return []
    times = rows[rows["metric"] == "time_us"]
    if not len(times):
        return []
    fig, ax = new_figure(8, 5)
    for source, algo, label in CURVES:
        part = times[(times["source"] == source) & (times["algo"] == algo)]
        if source == "nccl-tests":
            part = part[part["placement"] == "oop"]
        if len(part):
            part = part.sort_values("size_bytes")
            measured(ax, (part["size_bytes"].astype(float), part["value"]), label, marker=".")
    if len(expectations):
        predicted_times = expectations[
            (expectations["metric"] == "time_us") & (expectations["source"] == "model")
        ]
        for algo in ("ring", "tree"):
            part = predicted_times[predicted_times["algo"] == algo].sort_values("size_bytes")
            if len(part):
                # ring and tree each in a colour of its own: two grey dashes could not be told apart
                model(
                    ax,
                    (part["size_bytes"].astype(float), part["value"]),
                    f"model {algo}",
                    color=None,
                    alpha=0.6,
                )
        predicted = expectations[expectations["metric"] == "crossover_bytes"]
        if len(predicted) and is_finite_number(predicted["value"].iloc[0]):
            ax.axvline(
                float(predicted["value"].iloc[0]), color="grey", linestyle="--", label="predicted crossover"
            )
    for _, r in rows[rows["metric"] == "crossover_bytes"].iterrows():
        if is_finite_number(r["value"]):
            ax.axvline(
                float(r["value"]),
                linestyle=":",
                color="black",
                alpha=0.7,
                label=f"measured crossover ({r['source']})",
            )
    style(ax, xlabel="message size", ylabel="all-reduce time", logx=2, logy=True, xunit="bytes", yunit="us")
    return [
        finish(
            fig,
            "Ring vs tree all-reduce: where they cross",
            "Good: tree faster for small messages, ring for large, crossing (dotted) within 10× of the "
            "α-β prediction (dashed).",
        )
    ]
