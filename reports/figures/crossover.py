"""Crossover figure: all-reduce time of ring and tree over message size — the hand algorithms, NCCL pinned
to Ring and Tree where measured, the α-β model's ring and tree dashed — with the measured and predicted
crossover sizes as vertical lines."""

from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")

from matplotlib.figure import Figure  # noqa: E402

CURVES = (("hand", "ring", "hand ring"), ("hand", "tree", "hand tree"), ("torch", "library", "dist.all_reduce"),
          ("torch", "Ring", "torch NCCL_ALGO=Ring"), ("torch", "Tree", "torch NCCL_ALGO=Tree"),
          ("nccl-tests", "Ring", "nccl-tests Ring"), ("nccl-tests", "Tree", "nccl-tests Tree"))


def figures(rows, expectations, facts) -> list[Figure]:
    if rows is None or not len(rows):
        return []
    times = rows[rows["metric"] == "time_us"]
    if not len(times):
        return []
    fig = Figure(figsize=(8, 5))
    ax = fig.subplots()
    for source, algo, label in CURVES:
        part = times[(times["source"] == source) & (times["algo"] == algo)]
        if source == "nccl-tests":
            part = part[part["placement"] == "oop"]
        if len(part):
            part = part.sort_values("size_bytes")
            ax.plot(part["size_bytes"].astype(float), part["value"], marker=".", label=label)
    if len(expectations):
        model = expectations[(expectations["metric"] == "time_us") & (expectations["source"] == "model")]
        for algo in ("ring", "tree"):
            part = model[model["algo"] == algo].sort_values("size_bytes")
            if len(part):
                ax.plot(part["size_bytes"].astype(float), part["value"], "--", alpha=0.6, label=f"model {algo}")
        predicted = expectations[expectations["metric"] == "crossover_bytes"]
        if len(predicted) and _finite(predicted["value"].iloc[0]):
            ax.axvline(float(predicted["value"].iloc[0]), color="grey", linestyle="--", label="predicted crossover")
    measured = rows[rows["metric"] == "crossover_bytes"]
    for _, r in measured.iterrows():
        if _finite(r["value"]):
            ax.axvline(float(r["value"]), linestyle=":", color="black", alpha=0.7,
                       label=f"measured crossover ({r['source']})")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel("all-reduce time (µs)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    fig.suptitle("Ring vs tree all-reduce: where they cross")
    fig.tight_layout()
    return [fig]


def _finite(x) -> bool:
    try:
        return x is not None and math.isfinite(float(x))
    except (TypeError, ValueError):
        return False
