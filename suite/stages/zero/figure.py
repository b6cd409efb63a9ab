"""ZeRO figures: memory per rank for DDP and ZeRO-1/2/3 — measured peak, measured model state, and the model's
expected state bytes side by side — with each stage's step time (at node 0's degree on a multi-node run, then
each stage's step time over the degrees across the node boundary beside the α-β model); then the golden
comparison."""

from __future__ import annotations

from matplotlib.figure import Figure

from reports.figures._plot import finish, grouped_bars, limit, measured_vs_model, new_figure, style
from reports.figures._scaling import golden_figure, mark_node_boundary, node_boundary, series
from suite.costmodel.scaling_expectations import ZERO3_SLOWDOWN

FACTS: tuple[str, ...] = ()
"""The facts these figures read (of the manifest's facts and the profile): the figure cache's key holds only
these. None: the node boundary comes from the rows (the workers' nodes_spanned), which the key holds
anyway."""

NAMES = {0: "DDP", 1: "ZeRO-1", 2: "ZeRO-2", 3: "ZeRO-3"}


def figures(rows, expectations, facts) -> list[Figure]:
    if rows is None or not len(rows):
        return []
    out = []
    worlds = (
        sorted({int(w) for w in rows[rows["metric"] == "step_time_s"]["world"].dropna()})
        if "world" in rows
        else []
    )
    # node 0's degree (the only one on a node)
    first, first_model = (
        _at(rows, worlds[:1]),
        _at(expectations, worlds[:1]),
    )
    peak = series(first, "peak_memory_bytes", "zero")
    state = series(first, "state_memory_bytes", "zero")
    model = series(first_model, "state_memory_bytes", "zero")
    steps = series(first, "step_time_s", "zero")
    stages = sorted(set(peak) | set(state) | set(model))
    if stages:
        fig, (left, right) = new_figure(10, 3.8, 1, 2, gridspec_kw={"width_ratios": [3, 2]})
        grouped_bars(
            left,
            range(len(stages)),
            [
                (label, [values.get(z, 0) / 2**20 for z in stages], color)
                for label, values, color in (
                    ("measured peak", peak, "tab:blue"),
                    ("measured model state", state, "tab:cyan"),
                    ("expected model state", model, "tab:grey"),
                )
            ],
            width=0.27,
        )
        style(
            left,
            title="Memory per rank" + (f" ({worlds[0]} ranks, node 0)" if len(worlds) > 1 else ""),
            ylabel="MiB per rank",
            xticks=range(len(stages)),
            xticklabels=[NAMES.get(z, str(z)) for z in stages],
            grid="y",
        )
        if steps:
            right.bar(
                [NAMES.get(z, str(z)) for z in steps], [v * 1e3 for v in steps.values()], color="tab:purple"
            )
            if 0 in steps:
                limit(right, steps[0] * 1e3 * ZERO3_SLOWDOWN, f"{ZERO3_SLOWDOWN:g} × DDP")
        style(
            right,
            title="Step time",
            ylabel="ms per step",
            grid=None,
            legend=7 if steps and 0 in steps else None,
        )
        out.append(
            finish(
                fig,
                "ZeRO: memory per rank beside the model, and step time",
                "Good: memory per rank falling with each ZeRO stage as the model predicts, at a modest "
                "step-time cost.",
            )
        )
    if len(worlds) > 1:
        out.append(_across_degrees(rows, expectations, worlds))
    golden = golden_figure(
        _at(rows, worlds[:1]),
        _at(expectations, worlds[:1]),
        "zero",
        "ZeRO",
        "ZeRO: parameters after AdamW steps vs one process (ZeRO=0 is DDP)",
    )
    return out + ([golden] if golden else [])


def _at(frame, worlds: list[int]):
    """The frame's records at the one degree in `worlds` (all of them when none is given or it has no
    world)."""
    if frame is None or not len(frame) or not worlds or "world" not in frame:
        return frame
    return frame[frame["world"] == worlds[0]]


def _across_degrees(rows, expectations, worlds: list[int]) -> Figure:
    """Each ZeRO stage's step time over the degrees of a multi-node run, measured beside the α-β model, with
    the node boundary: where the degrees leave node 0 the inter-node β takes over."""
    fig, ax = new_figure(8, 3.8)
    for z, colour in zip(sorted(NAMES), ("tab:blue", "tab:orange", "tab:green", "tab:purple")):
        measured = {w: v * 1e3 for w, v in series(rows[rows["zero"] == z], "step_time_s", "world").items()}
        model = (
            {
                w: v * 1e3
                for w, v in series(expectations[expectations["zero"] == z], "step_time_s", "world").items()
            }
            if expectations is not None and len(expectations) and "zero" in expectations
            else {}
        )
        measured_vs_model(
            ax, measured, model, label=NAMES[z], model_label=f"{NAMES[z]} α-β", color=colour, model_marker="x"
        )
    mark_node_boundary(ax, node_boundary(rows))
    style(
        ax,
        title="Step time across nodes",
        xlabel="ranks",
        ylabel="ms per step",
        xticks=worlds,
        legend=6,
        ncol=2,
    )
    return finish(
        fig,
        "ZeRO across nodes: step time per degree beside the α-β model",
        "Good: every stage at or below its α-β points (communication unoverlapped, the inter-node β right of "
        "the dotted node boundary).",
    )
