"""Bandwidth figures: busbw over message size per collective (torch solid, nccl-tests dashed, the 70%-of-peak
floor dotted), and the all_reduce times with the fitted α-β line and its residual."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

from matplotlib.figure import Figure  # noqa: E402

COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "sendrecv")
STYLE = {"torch": "-", "nccl-tests": "--"}


def figures(rows, expectations, facts) -> list[Figure]:
    if rows is None or not len(rows):
        return []
    out = []
    busbw = rows[(rows["metric"] == "busbw") & rows["case"].isin(COLLECTIVES)]
    if len(busbw):
        out.append(busbw_figure(busbw, expectations))
    fit = fit_figure(rows, facts)
    if fit is not None:
        out.append(fit)
    return out


def busbw_figure(busbw, expectations) -> Figure:
    fig = Figure(figsize=(12, 7))
    axes = fig.subplots(2, 3, sharex=True).flatten()
    for ax, coll in zip(axes, COLLECTIVES):
        part = busbw[busbw["case"] == coll]
        for (source, placement), curve in part.groupby(["source", "placement"], dropna=False):
            curve = curve.sort_values("size_bytes")
            ax.plot(curve["size_bytes"].astype(float), curve["value"], STYLE.get(source, ":"), marker=".",
                    label=f"{source} {placement}")
        floor = expectations[(expectations["case"] == coll) & (expectations["metric"] == "busbw_min")] \
            if len(expectations) else expectations
        if floor is not None and len(floor):
            ax.axhline(float(floor["value"].iloc[0]), color="grey", linestyle=":", label="70% of link peak")
        ax.set_xscale("log", base=2)
        ax.set_title(coll)
        ax.set_ylabel("busbw (GB/s)")
        ax.grid(True, alpha=0.3)
        if len(part):
            ax.legend(fontsize=7)
    for ax in axes[3:]:
        ax.set_xlabel("message size (bytes)")
    fig.suptitle("Bus bandwidth by message size (torch solid, nccl-tests dashed)")
    fig.tight_layout()
    return fig


def fit_figure(rows, facts) -> Figure | None:
    fits = rows[rows["case"] == "fit.all_reduce"]
    if not len(fits):
        return None
    fig = Figure(figsize=(7, 4.5))
    ax = fig.subplots()
    notes = []
    for source, part in fits.groupby("source"):
        got = dict(zip(part["metric"], part["value"]))
        placement = "oop" if source == "nccl-tests" else "ip"
        pts = rows[(rows["case"] == "all_reduce") & (rows["metric"] == "time_us") & (rows["source"] == source)
                   & (rows["placement"] == placement) & rows["algo"].isna()].sort_values("size_bytes")
        if not len(pts):
            continue
        n = int(part["world"].iloc[0])
        sizes = pts["size_bytes"].astype(float)
        ax.plot(sizes, pts["value"], "o", label=f"{source} measured")
        # t = 2(n−1)(α + S/(nβ)); α in µs, β in GB/s = 1e3 bytes/µs
        model = [2 * (n - 1) * (got["alpha"] + s / (n * got["beta"] * 1e3)) for s in sizes]
        ax.plot(sizes, model, "-", label=f"{source} α-β fit")
        notes.append(f"{source}: α = {got['alpha']:.3g} µs, β = {got['beta']:.3g} GB/s, "
                     f"rms residual {got['rms_rel_residual']:.0%}")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel("all_reduce time (µs)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title("all_reduce time and the fitted ring α-β model\n" + "\n".join(notes), fontsize=9)
    fig.suptitle("α-β fit of all_reduce")
    fig.tight_layout()
    return fig
