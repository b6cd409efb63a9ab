"""Pieces the scaling figures (baseline, tp, dp, zero) share: picking values out of the tidy rows, the golden panel."""

from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")


def series(frame, metric: str, key: str, case: str = "train_step") -> dict[int, float]:
    """{key value: value} of one metric (e.g. step_time_s by tp), finite values only."""
    if frame is None or not len(frame) or key not in frame:
        return {}
    part = frame[(frame["case"] == case) & (frame["metric"] == metric)]
    out = {}
    for _, r in part.iterrows():
        k, v = r[key], r["value"]
        if k is not None and not _missing(k) and v is not None and math.isfinite(float(v)):
            out[int(k)] = float(v)
    return dict(sorted(out.items()))


def golden_panel(ax, rows, key: str, label: str, tolerance: float | None) -> bool:
    """Max |partitioned − single process| per case and degree on a log axis, the tolerance as a line."""
    part = rows[(rows["metric"] == "max_abs_error") & ~rows["case"].astype(str).str.startswith("mistake.")]
    if not len(part):
        return False
    cases = sorted(set(part["case"].astype(str)))
    keys = sorted({int(k) for k in part[key] if not _missing(k)})
    width = 0.8 / max(len(cases), 1)
    for i, case in enumerate(cases):
        values = []
        for k in keys:
            hit = part[(part["case"] == case) & (part[key] == k)]["value"]
            v = float(hit.iloc[0]) if len(hit) else math.nan
            values.append(max(v, 1e-12) if math.isfinite(v) else math.nan)  # 0 drawn at the floor of the log axis
        ax.bar([j + i * width for j in range(len(keys))], values, width=width, label=case)
    if tolerance:
        ax.axhline(tolerance, color="red", linestyle="--", label=f"tolerance {tolerance:g}")
    ax.set_yscale("log")
    ax.set_xticks([j + width * (len(cases) - 1) / 2 for j in range(len(keys))])
    ax.set_xticklabels([f"{label}={k}" for k in keys])
    ax.set_ylabel("max |partitioned − single process|")
    ax.set_title("Golden comparison (float32)")
    ax.legend(fontsize=7)
    ax.grid(True, axis="y", alpha=0.3)
    return True


def tolerance_from(expectations) -> float | None:
    if expectations is None or not len(expectations):
        return None
    tol = expectations[expectations["metric"] == "max_abs_error"]["value"]
    return float(tol.iloc[0]) if len(tol) else None


def _missing(x) -> bool:
    try:
        return x is None or (isinstance(x, float) and math.isnan(x)) or str(x) in ("<NA>", "nan", "")
    except TypeError:
        return True
