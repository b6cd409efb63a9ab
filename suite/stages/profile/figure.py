"""Profile figures: each rank's timeline over about one step (compute and communication lanes), and
per rank the communication, compute and overlapped time with the overlap percentage."""

from __future__ import annotations

from matplotlib.figure import Figure

from reports.figures._plot import finish, grouped_bars, new_figure, style

FACTS: tuple[str, ...] = ("trace_timeline", "trace_capture")
"""The facts these figures read (of the manifest's facts and the profile): the figure cache's key holds only
these."""

LANES = (("compute", "tab:blue"), ("comm", "tab:orange"))
PIXELS = 700  # drawn width of the time axis, about


def figures(rows, expectations, facts) -> list[Figure]:
    out = []
    timeline = (facts or {}).get("trace_timeline") or {}
    if timeline.get("ranks"):
        out.append(timeline_figure(timeline["ranks"], (facts.get("trace_capture") or {}).get("tool", "")))
    if rows is not None and len(rows) and "rank" in rows:
        totals = rows[
            rows["metric"].isin(["comm_us", "compute_us", "overlap_us", "overlap_pct"]) & rows["rank"].notna()
        ]
        if len(totals):
            out.append(totals_figure(totals))
    return out


def coalesce(intervals: list, gap: float) -> list[tuple[float, float]]:
    """Intervals closer than `gap` drawn as one: a gap under a pixel wide is invisible anyway, and the SVG
    stays small."""
    out: list[list[float]] = []
    for start, end in intervals:
        if out and start - out[-1][1] < gap:
            out[-1][1] = max(out[-1][1], end)
        else:
            out.append([start, end])
    return [(s, e) for s, e in out]


def timeline_figure(ranks: list[dict], tool: str) -> Figure:
    fig, ax = new_figure(10, 0.9 * len(ranks) + 1.4)
    labels, ticks = [], []
    for i, r in enumerate(ranks):
        base = (len(ranks) - 1 - i) * 3
        gap = float(r.get("length_us", 0.0)) / PIXELS
        for j, (lane, color) in enumerate(LANES):
            spans = [(s / 1e3, (e - s) / 1e3) for s, e in coalesce(r.get(lane, []), gap)]
            ax.broken_barh(spans, (base + j * 1.2, 1.0), facecolors=color, label=lane if i == 0 else None)
            ticks.append(base + j * 1.2 + 0.5)
            labels.append(f"rank {r['rank']} {lane}")
    ax.set_yticks(ticks, labels, fontsize=7)
    style(
        ax,
        title=f"Timeline per rank ({tool}): compute and communication lanes",
        xlabel="ms from the window's start (each rank its own window: about one step, ending with its last "
        "all-reduce)",
        grid="x",
        legend=8,
        loc="upper left",
    )
    return finish(
        fig, caption="Good: communication spans sitting under compute spans (overlap), not after them."
    )


def totals_figure(totals) -> Figure:
    fig, ax = new_figure(8, 4)
    ranks = sorted(int(r) for r in totals["rank"].dropna().unique())

    def get(rank: int, metric: str) -> float:
        part = totals[(totals["rank"] == rank) & (totals["metric"] == metric)]
        return float(part["value"].iloc[0]) if len(part) else float("nan")

    grouped_bars(
        ax,
        ranks,
        [
            (metric.removesuffix("_us"), [get(r, metric) / 1e3 for r in ranks], color)
            for metric, color in (
                ("compute_us", "tab:blue"),
                ("comm_us", "tab:orange"),
                ("overlap_us", "tab:green"),
            )
        ],
        width=0.27,
    )
    for r in ranks:
        pct = get(r, "overlap_pct")
        top = max(get(r, "compute_us"), get(r, "comm_us")) / 1e3
        ax.annotate(f"{pct:.1f}% overlapped", (r, top), ha="center", va="bottom", fontsize=8)
    ax.set_ylim(top=ax.get_ylim()[1] * 1.12)  # room for the percentages
    style(
        ax,
        title="Communication under compute per rank (overlap % = overlapped ÷ communication)",
        ylabel="ms over the analysed steps",
        xticks=ranks,
        xticklabels=[f"rank {r}" for r in ranks],
        grid="y",
        legend=8,
        loc="upper center",
        bbox_to_anchor=(0.5, -0.1),
        ncol=3,
    )
    return finish(
        fig, caption="Good: a large overlapped share of the communication on every rank, ranks alike."
    )
