"""ep figures: tokens routed and kept per expert for the uniform and the skewed router (the load and the
capacity's drops), the golden comparison against its tolerance; step time per capacity factor and the
dispatch all-to-all's bandwidth."""

from __future__ import annotations

import math
import re

from matplotlib.figure import Figure

from reports.figures._plot import finish, measured, new_figure, style

FACTS: tuple[str, ...] = ("profile",)
"""The facts these figures read (of the manifest's facts and the profile): the figure cache's key holds only
these."""

ROUTERS = ("uniform", "skewed")


def _per_expert(rows, router: str, metric: str) -> dict[int, float]:
    part = rows[(rows["metric"] == metric) & rows["case"].astype(str).str.startswith(f"{router}.expert")]
    return dict(
        sorted((int(str(c).rsplit("expert", 1)[1]), float(v)) for c, v in zip(part["case"], part["value"]))
    )


def _factor(case: str) -> float:
    """step.cf1.25 → 1.25; step.cf_none → inf (no limit, drawn last)."""
    match = re.match(r"step\.cf([0-9.]+)$", str(case))
    return float(match.group(1)) if match else math.inf


def figures(rows, expectations, facts) -> list[Figure]:
    if rows is None or not len(rows):
        return []
    out = []
    routed = {r: _per_expert(rows, r, "tokens_routed") for r in ROUTERS}
    if any(routed.values()):
        fig, panels = new_figure(10, 3.8, 1, 3)
        for ax, router in zip(panels[:2], ROUTERS):
            kept = _per_expert(rows, router, "tokens_kept")
            ax.bar(list(routed[router]), list(routed[router].values()), color="lightgrey", label="routed")
            ax.bar(list(kept), list(kept.values()), color="tab:blue", width=0.5, label="kept (received)")
            imb = rows[(rows["case"] == router) & (rows["metric"] == "imbalance")]["value"]
            style(
                ax,
                title=f"{router} router" + (f": max/mean {float(imb.iloc[0]):.2f}" if len(imb) else ""),
                xlabel="expert",
                ylabel="assignments",
                grid="y",
            )
        golden = rows[
            (rows["metric"] == "max_abs_error") & ~rows["case"].astype(str).str.startswith("mistake.")
        ]
        ax, labels = panels[2], list(golden["case"].astype(str))
        ax.bar(
            range(len(golden)),
            [max(float(v), 1e-12) if math.isfinite(float(v)) else math.nan for v in golden["value"]],
            color="tab:blue",
            label="|EP − one process|",
        )
        if len(expectations):  # each case's own tolerance (weight gradients have a larger scale)
            tol = expectations[expectations["metric"] == "max_abs_error"].set_index("case")["value"]
            marks = [(i, float(tol[c])) for i, c in enumerate(labels) if c in tol.index]
            ax.scatter(
                [i for i, _ in marks],
                [t for _, t in marks],
                marker="_",
                s=200,
                color="red",
                label="tolerance",
            )
        style(ax, title="Golden (float32)", logy=True, xticks=range(len(labels)), grid="y")
        ax.set_xticklabels(labels, rotation=90, fontsize=6)
        out.append(
            finish(
                fig,
                "Expert parallelism: load per expert and the golden comparison",
                "Good: blue (kept) as tall as grey (routed) unless the skewed router overflows an expert's "
                "capacity, and every golden bar under its red tolerance mark.",
            )
        )
    steps = rows[rows["case"].astype(str).str.startswith("step.") & (rows["metric"] == "time_s")]
    if len(steps):
        fig, (left, right) = new_figure(9, 3.8, 1, 2)
        for router, part in steps.groupby("algo"):
            pairs = sorted(zip([_factor(c) for c in part["case"]], part["value"].astype(float) * 1e3))
            measured(
                left,
                ([f"{f:g}" if math.isfinite(f) else "none" for f, _ in pairs], [t for _, t in pairs]),
                str(router),
            )
        style(
            left,
            title="Step time per capacity factor",
            xlabel="capacity factor",
            ylabel="ms per step (forward + backward)",
        )
        bw = rows[(rows["case"] == "dispatch") & (rows["metric"] == "algbw")]
        right.bar(list(bw["algo"].astype(str)), bw["value"].astype(float), color="tab:orange")
        for i, size in enumerate(bw["size_bytes"]):
            right.annotate(f"{int(size) / 2**20:.2f} MiB", (i, 0), ha="center", va="bottom", fontsize=7)
        style(
            right, title="Dispatch all-to-all", ylabel="GB/s leaving the busiest rank", grid="y", legend=None
        )
        judged = (facts or {}).get("profile", {}).get("judge_performance")
        out.append(
            finish(
                fig,
                "Expert parallelism: timings" + ("" if judged else " (CPU: not judged)"),
                "Good: the step time falling as the capacity factor shrinks (fewer padded slots), and the "
                "dispatch bandwidth near the bandwidth stage's all_to_all.",
            )
        )
    return out
