"""DP figures: tokens/s per rank as ranks are added, measured beside the α-β model's prediction (on a
multi-node run across the node boundary, marked where the degrees leave node 0); and the golden comparison of
parameters after training against its tolerance."""

from __future__ import annotations

from matplotlib.figure import Figure

from reports.figures._plot import finish, measured_vs_model, new_figure, style
from reports.figures._scaling import golden_figure, mark_node_boundary, node_boundary, series
from suite.costmodel.scaling_expectations import DP_MARGIN

FACTS: tuple[str, ...] = ()
"""The facts these figures read (of the manifest's facts and the profile): the figure cache's key holds only
these. None: the node boundary comes from the rows (the workers' nodes_spanned), which the key holds
anyway."""


def figures(rows, expectations, facts) -> list[Figure]:
    if rows is None or not len(rows):
        return []
    out = []
    measured = series(rows, "tokens_per_s_per_rank", "world")
    if measured:
        fig, (left, right) = new_figure(9, 3.8, 1, 2)
        worlds = list(measured)
        boundary = node_boundary(rows)  # from the rows: None on one node
        measured_vs_model(
            left,
            measured,
            series(expectations, "tokens_per_s_per_rank", "world"),
            model_label="α-β model",
            model_marker="x",
        )
        mark_node_boundary(left, boundary)
        style(
            left,
            title="Per-rank throughput",
            xlabel="DDP ranks (fixed global batch)",
            ylabel="tokens/s per rank",
            xticks=worlds,
        )
        model_efficiency = series(expectations, "efficiency", "world")
        measured_vs_model(
            right,
            series(rows, "efficiency", "world"),
            model_efficiency,
            model_label="α-β model",
            model_marker="x",
        )
        if model_efficiency:  # dp.decay's threshold: what the verdict holds the measured points to
            right.plot(
                list(model_efficiency),
                [DP_MARGIN * v for v in model_efficiency.values()],
                color="red",
                linestyle="--",
                label=f"verdict floor: {DP_MARGIN:.0%} of the model",
            )
        right.set_ylim(0, 1.1)
        mark_node_boundary(right, boundary)
        style(
            right, title="Decay", xlabel="DDP ranks", ylabel="per-rank throughput ÷ one rank's", xticks=worlds
        )
        out.append(
            finish(
                fig,
                "Data parallelism: throughput per rank beside the α-β model",
                "Good: throughput per rank stays near the one-card value as ranks are added, at or "
                "above the model and never under the red floor."
                + (
                    " Right of the dotted node boundary the degrees span nodes, predicted with the "
                    "inter-node β."
                    if boundary is not None
                    else ""
                ),
            )
        )
    golden = golden_figure(
        rows, expectations, "world", "ranks", "Data parallelism: parameters after training vs one process"
    )
    return out + ([golden] if golden else [])
