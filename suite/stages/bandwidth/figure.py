"""Bandwidth figures: busbw over message size per collective (torch solid, nccl-tests dashed, the 70%-of-peak
floor dotted), and the all_reduce times with the fitted α-β line and its residual; on a multi-node run also
each node's intra-node curve beside the curve across nodes, with both floors (intra_node.py)."""

from __future__ import annotations

from matplotlib.figure import Figure

from reports.figures._plot import finish, limit, measured, measured_vs_model, new_figure, source_colour, style

# the curve drawn: nccl-tests' where it ran, else torch's, as judged
from suite.stages.bandwidth.intra_judges import (
    SOURCES,
)

# `intra.all_reduce@gpu-a` → ('all_reduce', 'gpu-a')
from suite.stages.bandwidth.intra_node import (
    split_case as node_of,
)

FACTS: tuple[str, ...] = ()
"""The facts these figures read (of the manifest's facts and the profile): the figure cache's key holds only
these."""

COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "sendrecv")
STYLE = {"torch": "-", "nccl-tests": "--"}


def figures(rows, expectations, facts) -> list[Figure]:
    if rows is None or not len(rows):
        return []
    out = []
    busbw = rows[(rows["metric"] == "busbw") & rows["case"].isin(COLLECTIVES)]
    if len(busbw):
        out.append(busbw_figure(busbw, expectations))
    split = split_figure(rows, expectations)
    if split is not None:  # a multi-node run: intra-node (each node) vs inter-node
        out.append(split)
    fit = fit_figure(rows, facts)
    if fit is not None:
        out.append(fit)
    return out


def busbw_figure(busbw, expectations) -> Figure:
    """A panel per collective measured (an ingest of one all_reduce capture draws one, not five empty beside
    it)."""
    present = [coll for coll in COLLECTIVES if (busbw["case"] == coll).any()]
    cols, grid_rows = min(3, len(present)), (len(present) + 2) // 3
    fig, axes = new_figure(max(4 * cols, 7.5), 3.5 * grid_rows, grid_rows, cols, sharex=True, squeeze=False)
    axes = axes.flatten()
    for ax in axes[len(present) :]:  # the grid's spare cells (5 collectives on 2 × 3): not drawn
        ax.set_visible(False)
    for i, (ax, coll) in enumerate(zip(axes, present)):
        part = busbw[busbw["case"] == coll]
        for (source, placement), curve in part.groupby(["source", "placement"], dropna=False):
            curve = curve.sort_values("size_bytes")
            # the colour says the source, the marker the placement (out of place: x, in place: dot)
            measured(
                ax,
                (curve["size_bytes"].astype(float), curve["value"]),
                f"{source} {placement}",
                linestyle=STYLE.get(source, ":"),
                marker="x" if placement == "oop" else ".",
                color=source_colour(source),
                alpha=0.7 if placement == "oop" else 1.0,
            )
        floor = (
            expectations[(expectations["case"] == coll) & (expectations["metric"] == "busbw_min")]
            if len(expectations)
            else expectations
        )
        if floor is not None and len(floor):
            inter = str(floor["basis"].iloc[0]).startswith("inter-node")
            limit(
                ax,
                float(floor["value"].iloc[0]),
                "verdict floor: 70% of the inter-node ceiling"
                if inter
                else "verdict floor: 70% of link peak",
            )
        style(
            ax,
            title=coll,
            xlabel="message size" if i >= len(present) - cols else None,
            ylabel="busbw (GB/s)",
            logx=2,
            xunit="bytes",
            legend=7 if len(part) else None,
        )
    return finish(
        fig,
        "Bus bandwidth by message size (torch solid, nccl-tests dashed)",
        "Good: each curve rises with the message size and flattens above the red 70%-of-link-peak "
        "floor, torch close to nccl-tests, no dip.",
    )


def fit_figure(rows, facts) -> Figure | None:
    fits = rows[rows["case"] == "fit.all_reduce"]
    if not len(fits):
        return None
    fig, ax = new_figure(7, 4.5)
    notes = []
    for i, (source, part) in enumerate(fits.groupby("source")):
        got = dict(zip(part["metric"], part["value"]))
        placement = "oop" if source == "nccl-tests" else "ip"
        pts = rows[
            (rows["case"] == "all_reduce")
            & (rows["metric"] == "time_us")
            & (rows["source"] == source)
            & (rows["placement"] == placement)
            & rows["algo"].isna()
        ].sort_values("size_bytes")
        if not len(pts):
            continue
        n = int(part["world"].iloc[0])
        sizes = pts["size_bytes"].astype(float)
        # t = 2(n−1)(α + S/(nβ)); α in µs, β in GB/s = 1e3 bytes/µs
        model = [2 * (n - 1) * (got["alpha"] + s / (n * got["beta"] * 1e3)) for s in sizes]
        measured_vs_model(
            ax,
            (sizes, pts["value"]),
            (sizes, model),
            label=f"{source} measured",
            model_label=f"{source} α-β fit",
            color=source_colour(source, f"C{i}"),
            points=True,
        )
        notes.append(
            f"{source}: α = {got['alpha']:.3g} µs, β = {got['beta']:.3g} GB/s, "
            f"rms residual {got['rms_rel_residual']:.0%}"
        )
    style(
        ax,
        xlabel="message size",
        ylabel="all_reduce time",
        logx=2,
        logy=True,
        xunit="bytes",
        yunit="us",
        legend=8,
    )
    ax.set_title("all_reduce time and the fitted ring α-β model\n" + "\n".join(notes), fontsize=9)
    return finish(
        fig,
        "α-β fit of all_reduce",
        "Good: the measured points lie on their dashed α-β line "
        "(a small rms residual); α is the latency, β the bandwidth.",
    )


def best_curve(part):
    """size → the best busbw over placements, sorted by size."""
    return part.groupby("size_bytes")["value"].max().sort_index()


def split_figure(rows, expectations) -> Figure | None:
    """Per collective: the sweep across nodes and each node's own sweep (solid), the inter-node and intra-node
    floors (dashed); None on a single-node run (no intra rows)."""
    busbw = rows[rows["metric"] == "busbw"]
    named = busbw["case"].astype(str).map(node_of)
    if not named.notna().any():
        return None
    intra = busbw[named.notna()].assign(
        coll=named[named.notna()].map(lambda t: t[0]), node=named[named.notna()].map(lambda t: t[1])
    )
    intra = intra[intra["coll"].isin(COLLECTIVES)]
    if not len(intra):
        return None
    colls = [c for c in COLLECTIVES if c in set(intra["coll"])]
    cols = min(3, len(colls))
    fig, axes = new_figure(
        4 * cols,
        3.5 * ((len(colls) + cols - 1) // cols),
        (len(colls) + cols - 1) // cols,
        cols,
        sharex=True,
        squeeze=False,
    )
    axes = axes.flatten()
    for ax in axes[len(colls) :]:
        ax.set_visible(False)
    for i, (ax, coll) in enumerate(zip(axes, colls)):
        source = next(
            (s for s in SOURCES if ((intra["coll"] == coll) & (intra["source"] == s)).any()), SOURCES[-1]
        )
        across = busbw[(busbw["case"] == coll) & (busbw["source"] == source)]
        if len(across):
            curve = best_curve(across)
            measured(ax, (curve.index.astype(float), curve.values), f"inter-node ({source})", color="black")
        for j, (node, part) in enumerate(
            intra[(intra["coll"] == coll) & (intra["source"] == source)].groupby("node")
        ):
            curve = best_curve(part)
            measured(
                ax, (curve.index.astype(float), curve.values), f"intra {node}", color=f"C{j}", marker="."
            )
        floors = expectations[expectations["metric"] == "busbw_min"] if len(expectations) else expectations
        if floors is not None and len(floors):
            inter = floors[floors["case"] == coll]
            if len(inter):
                limit(ax, float(inter["value"].iloc[0]), "inter-node floor", color="black")
            own = floors[floors["case"].map(lambda c: (node_of(c) or ("",))[0] == coll)]
            if len(own):
                limit(ax, float(own["value"].min()), "intra-node floor", color="red")
        style(
            ax,
            title=coll,
            xlabel="message size" if i >= len(colls) - cols else None,
            ylabel="busbw (GB/s)" if i % cols == 0 else None,
            logx=2,
            xunit="bytes",
            legend=7,
        )
    return finish(
        fig,
        "Intra-node (each node) vs inter-node bus bandwidth",
        "Good: every node's own curve reaches the red intra-node floor (70% of the link peak), the curve "
        "across nodes the black inter-node floor (70% of min(link peak, NICs × line rate)); a node whose "
        "curve lies below the others' is the suspect.",
    )
