"""TP figures: speedup over TP degree beside the ideal, with the communication share of each step;
and the golden comparison (max |TP − single process| per degree) against its tolerance."""

from __future__ import annotations

from matplotlib.figure import Figure

from reports.figures._plot import finish, measured_vs_model, new_figure, style
from reports.figures._scaling import golden_figure, series

FACTS: tuple[str, ...] = ()
"""The facts these figures read (of the manifest's facts and the profile): the figure cache's key holds only
these."""


def figures(rows, expectations, facts) -> list[Figure]:
    if rows is None or not len(rows):
        return []
    out = []
    speedup = series(rows, "speedup", "tp")
    share = series(rows, "comm_share", "tp")
    if speedup:
        fig, (left, right) = new_figure(9, 3.8, 1, 2)
        degrees = list(speedup)
        measured_vs_model(left, speedup, series(expectations, "speedup", "tp"), model_label="ideal (d×)")
        style(
            left,
            title="Speedup",
            xlabel="TP degree",
            ylabel="speedup vs baseline",
            logx=2,
            xticks=degrees,
            xticklabels=[str(d) for d in degrees],
        )
        if share:
            right.bar([str(d) for d in share], [v * 100 for v in share.values()], color="tab:orange")
            right.set_ylim(0, 100)
        style(
            right,
            title="Communication share (profiler)",
            xlabel="TP degree",
            ylabel="% of step in communication",
            grid=None,
            legend=None,
        )
        out.append(
            finish(
                fig,
                "Tensor parallelism: speedup and communication",
                "Good: the speedup keeps rising towards the dashed ideal with each TP doubling, and the "
                "communication share stays small.",
            )
        )
    golden = golden_figure(
        rows,
        expectations,
        "tp",
        "TP",
        "Tensor parallelism: sharded vs single-process forward and backward",
        height=3.8,
    )
    return out + ([golden] if golden else [])
