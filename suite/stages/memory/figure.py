"""Memory figure: each measured term beside its formula (model state, activations per block with and without
checkpointing), and the batch search's tries — peak bytes per batch, fits or OOM, against the cap."""

from __future__ import annotations

import math

from matplotlib.figure import Figure

from reports.figures._plot import finish, grouped_bars, log_axis

FACTS: tuple[str, ...] = ()
"""The facts these figures read (of the manifest's facts and the profile): the figure cache's key holds only
these."""

TERMS = (
    ("state", "parameters"),
    ("state", "gradients"),
    ("state", "optimizer"),
    ("activations", "bytes_per_layer"),
    ("activations.checkpoint", "bytes_per_layer"),
)


def _value(frame, case, metric):
    if frame is None or not len(frame):
        return math.nan
    hit = frame[(frame["case"] == case) & (frame["metric"] == metric)]["value"]
    return float(hit.iloc[0]) if len(hit) else math.nan


def figures(rows, expectations, facts) -> list[Figure]:
    if rows is None or not len(rows):
        return []
    fig = Figure(figsize=(9, 3.6))
    terms, search = fig.subplots(1, 2)
    labels = ["params", "grads", "AdamW", "act/block", "act/block\n(ckpt)"]
    measured = [_value(rows, c, m) / 2**20 for c, m in TERMS]
    formula = [_value(expectations, c, m) / 2**20 for c, m in TERMS]
    xs = range(len(labels))
    grouped_bars(terms, xs, [("measured", measured, "tab:blue"), ("formula", formula, "tab:grey")], width=0.4)
    terms.set_xticks(list(xs), labels, fontsize=7)
    terms.set_ylabel("MiB")
    terms.set_title("Memory terms vs the formula")
    terms.legend(fontsize=7)
    tries = rows[(rows["case"] == "search") & (rows["metric"] == "try_peak_bytes")]
    fits = rows[(rows["case"] == "search") & (rows["metric"] == "try_fits")]
    ok = {int(r["count"]): bool(r["value"]) for _, r in fits.iterrows()}
    baseline, cap = _value(rows, "search", "baseline_bytes"), _value(rows, "search", "cap_bytes")
    for _, r in tries.iterrows():
        b = int(r["count"])
        search.scatter(
            [b],
            [(r["value"] + baseline) / 2**20],
            color="tab:green" if ok.get(b) else "tab:red",
            marker="o" if ok.get(b) else "x",
        )
    if math.isfinite(cap):
        search.axhline(cap / 2**20, color="red", linestyle="--", label="cap")
        search.legend(fontsize=7)
    largest = _value(rows, "search", "largest_batch")
    log_axis(search, "x", 2)
    search.set_xlabel("batch (sequences)")
    search.set_ylabel("peak MiB (green fits, red OOM)")
    search.set_title(f"Largest batch that fits: {largest:.0f}")
    return [
        finish(
            fig,
            caption="Good: each blue bar level with its grey formula bar, green dots (fits) below the red "
            "cap and red crosses (out of memory) above it.",
        )
    ]
