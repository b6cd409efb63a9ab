"""Pieces the scaling figures (baseline, tp, dp, zero) share: picking values out of the tidy rows, the golden
panel."""

from __future__ import annotations

import math

from matplotlib.figure import Figure

from reports.figures._plot import finish, grouped_bars, limit, new_figure, style
from suite.values import is_finite_number, is_missing


def series(frame, metric: str, key: str, case: str = "train_step") -> dict[int, float]:
    """{key value: value} of one metric (e.g. step_time_s by tp), finite values only."""
    if frame is None or not len(frame) or key not in frame:
        return {}
    part = frame[(frame["case"] == case) & (frame["metric"] == metric)]
    out = {}
    for _, r in part.iterrows():
        k, v = r[key], r["value"]
        if not is_missing(k) and is_finite_number(v):
            out[int(k)] = float(v)
    return dict(sorted(out.items()))


def golden_panel(ax, rows, key: str, label: str, tolerance: float | None) -> bool:
    """Max |partitioned − single process| per case and degree on a log axis, the tolerance as a line."""
    part = rows[(rows["metric"] == "max_abs_error") & ~rows["case"].astype(str).str.startswith("mistake.")]
    if not len(part):
        return False
    cases = sorted(set(part["case"].astype(str)))
    keys = sorted({int(k) for k in part[key] if not is_missing(k)})
    groups = []
    for case in cases:
        values = []
        for k in keys:
            hit = part[(part["case"] == case) & (part[key] == k)]["value"]
            v = float(hit.iloc[0]) if len(hit) else math.nan
            # 0 drawn at the floor of the log axis
            values.append(max(v, 1e-12) if math.isfinite(v) else math.nan)
        groups.append((case, values, None))
    grouped_bars(ax, range(len(keys)), groups, width=0.8 / max(len(cases), 1))
    if tolerance:
        limit(ax, tolerance, f"tolerance {tolerance:g}")
    style(
        ax,
        title="Golden comparison (float32)",
        ylabel="max |partitioned − single process|",
        logy=True,
        xticks=range(len(keys)),
        xticklabels=[f"{label}={k}" for k in keys],
        grid="y",
    )
    return True


def golden_figure(rows, expectations, key: str, label: str, title: str, height: float = 3.6) -> Figure | None:
    """The golden panel as a figure of its own; None when no comparison was recorded."""
    fig, ax = new_figure(8, height)
    if not golden_panel(ax, rows, key, label, tolerance_from(expectations)):
        return None
    return finish(
        fig,
        title,
        "Good: every bar below the red tolerance line (the sharded run computes what one "
        "process computes, to float32 rounding).",
    )


def tolerance_from(expectations) -> float | None:
    if expectations is None or not len(expectations):
        return None
    tol = expectations[expectations["metric"] == "max_abs_error"]["value"]
    return float(tol.iloc[0]) if len(tol) else None


def node_boundary(rows) -> float | None:
    """Where a multi-node run's degrees leave node 0, on a degree axis: halfway between the largest degree
    whose ranks were on one node and the smallest on more (the workers' nodes_spanned rows); None on one
    node."""
    spanned = series(rows, "nodes_spanned", "world")
    inside = [d for d, n in spanned.items() if n <= 1]
    across = [d for d, n in spanned.items() if n > 1]
    if not inside or not across:
        return None
    return (max(inside) + min(across)) / 2


def mark_node_boundary(ax, x: float | None) -> None:
    """A vertical line at the node boundary (nothing on one node): left of it node 0 alone, right of it whole
    nodes."""
    if x is not None:
        ax.axvline(x, color="grey", linestyle=":", label="node boundary")
