"""Health figure: per GPU (per rank on CPU), the measured bf16 GEMM throughput and the pinned host→device and
device→host copy bandwidth, each bar with its outlier threshold (90 % of the median of its peers; 50 % on CPU
ranks) drawn over it; a bar below its threshold is red. Good looks like bars of one height, every one above
its mark."""

from __future__ import annotations

import statistics

from matplotlib.figure import Figure

from reports.figures._plot import finish

FACTS: tuple[str, ...] = ("profile",)
"""The facts these figures read (of the manifest's facts and the profile): the figure cache's key holds only
these."""

PANELS = (
    ("gemm_tflops", "GEMM", "TFLOP/s"),
    ("h2d_GBps", "host → device (pinned)", "GB/s"),
    ("d2h_GBps", "device → host (pinned)", "GB/s"),
)
# suite/stages/health/rules.py's marks on GPUs / CPU ranks (the report
PEER_FRACTION = {
    True: 0.90,
    False: 0.50,
}
# does not import the stages)


def figures(rows, expectations, facts) -> list[Figure]:
    if rows is None or not len(rows) or "metric" not in rows:
        return []
    present = [p for p in PANELS if (rows["metric"] == p[0]).any()]
    if not present:
        return []
    on_gpu = bool(facts.get("profile", {}).get("judge_performance", False))
    who = "GPU" if on_gpu else "rank"
    fraction = PEER_FRACTION[on_gpu]
    fig = Figure(figsize=(4 * len(present), 3.4))
    axes = fig.subplots(1, len(present), squeeze=False)[0]
    for ax, (metric, title, unit) in zip(axes, present):
        sel = rows[rows["metric"] == metric].sort_values("rank")
        ranks = [int(r) for r in sel["rank"]]
        values = [float(v) for v in sel["value"]]
        marks = [
            fraction * statistics.median([v for j, v in enumerate(values) if j != i])
            if len(values) > 1
            else 0.0
            for i in range(len(values))
        ]
        colours = ["tab:red" if v < m else "tab:blue" for v, m in zip(values, marks)]
        ax.bar([str(r) for r in ranks], values, color=colours)
        ax.hlines(
            marks,
            [i - 0.4 for i in range(len(marks))],
            [i + 0.4 for i in range(len(marks))],
            colors="black",
            linestyles="--",
            label=f"{fraction:.0%} of its peers' median",
        )
        dtypes = sorted({str(d) for d in sel.get("dtype", []) if isinstance(d, str)})
        ax.set_title(
            f"{'/'.join(dtypes)} {title}" if metric == "gemm_tflops" and dtypes else title, fontsize=10
        )
        ax.set_xlabel(who)
        ax.set_ylabel(unit)
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=7, loc="lower right")
    note = "" if on_gpu else " (CPU ranks: the rule at work, the numbers mean nothing)"
    fig.suptitle(f"Per-{who} speed{note}", fontsize=10)
    return [
        finish(
            fig,
            caption=f"Good: bars of one height, every one above its dashed mark ({fraction:.0%} of its "
            f"peers' median); a red bar is a slow {who}.",
        )
    ]
