"""DP figures: tokens/s per rank as ranks are added, measured beside the α-β model's prediction; and
the golden comparison of parameters after training against its tolerance."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

from matplotlib.figure import Figure  # noqa: E402

from ._scaling import golden_panel, series, tolerance_from  # noqa: E402


def figures(rows, expectations, facts) -> list[Figure]:
    if rows is None or not len(rows):
        return []
    out = []
    measured = series(rows, "tokens_per_s_per_rank", "world")
    if measured:
        fig = Figure(figsize=(9, 3.8))
        left, right = fig.subplots(1, 2)
        worlds = list(measured)
        left.plot(worlds, list(measured.values()), marker="o", label="measured")
        predicted = series(expectations, "tokens_per_s_per_rank", "world") if len(expectations) else {}
        if predicted:
            left.plot(list(predicted), list(predicted.values()), "--", marker="x", color="grey", label="α-β model")
        left.set_xticks(worlds)
        left.set_xlabel("DDP ranks (fixed global batch)")
        left.set_ylabel("tokens/s per rank")
        left.set_title("Per-rank throughput")
        left.grid(True, alpha=0.3)
        left.legend(fontsize=7)
        eff = series(rows, "efficiency", "world")
        eff_model = series(expectations, "efficiency", "world") if len(expectations) else {}
        if eff:
            right.plot(list(eff), list(eff.values()), marker="o", label="measured")
        if eff_model:
            right.plot(list(eff_model), list(eff_model.values()), "--", marker="x", color="grey", label="α-β model")
        right.set_ylim(0, 1.1)
        right.set_xticks(worlds)
        right.set_xlabel("DDP ranks")
        right.set_ylabel("per-rank throughput ÷ one rank's")
        right.set_title("Decay")
        right.grid(True, alpha=0.3)
        right.legend(fontsize=7)
        fig.suptitle("Data parallelism: throughput per rank beside the α-β model")
        fig.tight_layout()
        out.append(fig)
    fig = Figure(figsize=(8, 3.6))
    if golden_panel(fig.subplots(), rows, "world", "ranks", tolerance_from(expectations)):
        fig.suptitle("Data parallelism: parameters after training vs one process")
        fig.tight_layout()
        out.append(fig)
    return out
