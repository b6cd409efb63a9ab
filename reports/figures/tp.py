"""TP figures: speedup over TP degree beside the ideal, with the communication share of each step;
and the golden comparison (max |TP − single process| per degree) against its tolerance."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

from matplotlib.figure import Figure  # noqa: E402

from ._scaling import golden_panel, series, tolerance_from  # noqa: E402


def figures(rows, expectations, facts) -> list[Figure]:
    if rows is None or not len(rows):
        return []
    out = []
    speedup = series(rows, "speedup", "tp")
    share = series(rows, "comm_share", "tp")
    if speedup:
        fig = Figure(figsize=(9, 3.8))
        left, right = fig.subplots(1, 2)
        degrees = list(speedup)
        left.plot(degrees, list(speedup.values()), marker="o", label="measured")
        ideal = series(expectations, "speedup", "tp") if len(expectations) else {}
        if ideal:
            left.plot(list(ideal), list(ideal.values()), "--", color="grey", label="ideal (d×)")
        left.set_xscale("log", base=2)
        left.set_xticks(degrees)
        left.set_xticklabels([str(d) for d in degrees])
        left.set_xlabel("TP degree")
        left.set_ylabel("speedup vs baseline")
        left.set_title("Speedup")
        left.grid(True, alpha=0.3)
        left.legend(fontsize=7)
        if share:
            right.bar([str(d) for d in share], [v * 100 for v in share.values()], color="tab:orange")
            right.set_ylim(0, 100)
        right.set_xlabel("TP degree")
        right.set_ylabel("% of step in communication")
        right.set_title("Communication share (profiler)")
        fig.suptitle("Tensor parallelism: speedup and communication")
        fig.tight_layout()
        out.append(fig)
    fig = Figure(figsize=(8, 3.8))
    if golden_panel(fig.subplots(), rows, "tp", "TP", tolerance_from(expectations)):
        fig.suptitle("Tensor parallelism: sharded vs single-process forward and backward")
        fig.tight_layout()
        out.append(fig)
    return out
