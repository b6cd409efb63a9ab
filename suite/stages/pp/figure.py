"""Pipeline figures: the measured bubble of each schedule on the formula's curve (sleep stages, and the GPT
per PP degree), and the golden comparison of each schedule against its tolerance."""

from __future__ import annotations

import math

from matplotlib.figure import Figure

from reports.figures._plot import finish, log_axis
from suite.costmodel.bubble import bubble_fraction, schedule_chunks

FACTS: tuple[str, ...] = ("profile",)
"""The facts these figures read (of the manifest's facts and the profile): the figure cache's key holds only
these."""

COLOURS = {
    "hand_1f1b": "tab:green",
    "gpipe": "tab:blue",
    "1f1b": "tab:orange",
    "interleaved_1f1b": "tab:purple",
}


def figures(rows, expectations, facts) -> list[Figure]:
    if rows is None or not len(rows):
        return []
    section = ((facts or {}).get("profile") or {}).get("pp") or {}
    chunks = int(section.get("chunks", 2))
    sleeps = f"{section.get('forward_ms', 40):g} ms forward, {section.get('backward_ms', 80):g} ms backward"
    out = []
    sleep = _bubble_points(rows, "sleep_stages")
    if sleep:
        fig = Figure(figsize=(8, 4.2))
        _bubble_axes(fig.subplots(), sleep, chunks, f"sleep stages ({sleeps})")
        out.append(
            finish(fig, "Pipeline bubble: measured idle/total per rank against the formula", BUBBLE_GOOD)
        )
    gpt = _bubble_points(rows, "gpt")
    degrees = sorted({p for (_, p) in gpt})
    if degrees:
        fig = Figure(figsize=(4 * len(degrees), 3.8))
        axes = fig.subplots(1, len(degrees), squeeze=False)[0]
        for ax, d in zip(axes, degrees):
            _bubble_axes(ax, {k: v for k, v in gpt.items() if k[1] == d}, chunks, f"GPT, PP={d}")
        out.append(
            finish(fig, "Pipeline bubble of the GPT per schedule, one panel per PP degree", BUBBLE_GOOD)
        )
    memory = _memory(rows)
    if memory:
        fig = Figure(figsize=(8, 3.8))
        ax = fig.subplots()
        ranks = sorted({r for v in memory.values() for r in v})
        _grouped_bars(
            ax,
            memory,
            [(f"rank {r}", r) for r in ranks],
            lambda v: v / 2**30,
            lambda k: f"{k[0]}\nPP={k[1]} M={k[2]}",
        )
        ax.set_ylabel("activation memory, GiB (peak − start of step)")
        out.append(
            finish(
                fig,
                "Pipeline: activation memory per stage (1F1B holds ≤ P micro-batches, GPipe all M)",
                "Good: 1F1B's bars flat as M grows (at most P micro-batches in flight), GPipe's growing "
                "with M.",
            )
        )
    golden = _golden(rows)
    if golden:
        fig = Figure(figsize=(8, 3.8))
        ax = fig.subplots()
        cases = sorted({c for v in golden.values() for c in v})
        _grouped_bars(
            ax, golden, [(c, c) for c in cases], lambda v: max(v, 1e-12), lambda k: f"{k[0]}\nPP={k[1]}"
        )
        tol = _tolerance(expectations)
        if tol:
            ax.axhline(tol, color="red", linestyle="--", label=f"tolerance (gradients) {tol:.2g}")
            ax.legend(fontsize=6)
        log_axis(ax, "y")
        ax.set_ylabel("max |pipeline − one process|")
        out.append(
            finish(
                fig,
                "Pipeline schedules against one process (float32)",
                "Good: every bar below the red tolerance line (each schedule computes what one process "
                "computes).",
            )
        )
    return out


def _grouped_bars(ax, table: dict, groups: list[tuple[str, object]], scale, label) -> None:
    """Bars of table[key][member] for each key (x) and group member (a bar beside the others), centred."""
    keys = sorted(table)
    width = 0.8 / max(len(groups), 1)
    for i, (name, member) in enumerate(groups):
        ax.bar(
            [j + i * width for j in range(len(keys))],
            [scale(table[k].get(member, math.nan)) for k in keys],
            width=width,
            label=name,
        )
    ax.set_xticks([j + width * (len(groups) - 1) / 2 for j in range(len(keys))])
    ax.set_xticklabels([label(k) for k in keys], fontsize=7)
    ax.legend(fontsize=6, ncol=2)
    ax.grid(True, axis="y", alpha=0.3)


def _bubble_points(rows, case: str) -> dict[tuple[str, int], list[tuple[int, float]]]:
    """{(schedule, P): [(M, idle share of one rank), …]}."""
    part = rows[(rows["case"] == case) & (rows["metric"] == "bubble")]
    out: dict[tuple[str, int], list[tuple[int, float]]] = {}
    for _, r in part.iterrows():
        value = float(r["value"])
        if math.isfinite(value):
            out.setdefault((str(r["algo"]), int(r["world"])), []).append((int(r["count"]), value))
    return out


BUBBLE_GOOD = (
    "Good: each schedule's measured points on its dashed formula curve; the idle share falls as the "
    "micro-batches M grow."
)
MARKERS = {"hand_1f1b": "s", "gpipe": "o", "1f1b": "^", "interleaved_1f1b": "D"}


def _bubble_axes(ax, points, chunks: int, title: str) -> None:
    """One formula curve per (P, v) — GPipe, 1F1B and the hand-written 1F1B share one — and each schedule's
    measured points (one per rank) on it."""
    curves: dict[tuple[int, int], int] = {}
    for (schedule, p), pts in points.items():
        key = (p, schedule_chunks(schedule, chunks))
        curves[key] = max(curves.get(key, 1), *(m for m, _ in pts))
    for (p, v), top in sorted(curves.items()):
        ms = [m / 8 for m in range(8, 8 * top + 1)]
        ax.plot(
            ms,
            [bubble_fraction(p, m, v) for m in ms],
            "--",
            color="grey" if v == 1 else "tab:purple",
            alpha=0.7,
            label=f"(P−1)/(M+P−1), P={p}" if v == 1 else f"(P−1)/(vM+P−1), P={p}, v={v}",
        )
    for (schedule, p), pts in sorted(points.items()):
        ax.plot(
            [m for m, _ in pts],
            [x for _, x in pts],
            MARKERS.get(schedule, "o"),
            color=COLOURS.get(schedule),
            label=f"{schedule} measured",
            markersize=5,
            alpha=0.8,
            fillstyle="none",
        )
    ticks = sorted({m for pts in points.values() for m, _ in pts})
    log_axis(ax, "x", 2)
    ax.set_xticks(ticks)
    ax.set_xticklabels([str(m) for m in ticks])
    ax.set_xlabel("micro-batches M")
    ax.set_ylabel("idle / total")
    ax.set_ylim(0, 0.6)
    ax.set_title(title, fontsize=9)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=6)


def _memory(rows) -> dict[tuple[str, int, int], dict[int, float]]:
    """{(schedule, P, M): {rank: activation bytes}} of the GPT timing (GPUs only)."""
    part = rows[(rows["case"] == "gpt") & (rows["metric"] == "activation_memory_bytes")]
    out: dict[tuple[str, int, int], dict[int, float]] = {}
    for _, r in part.iterrows():
        out.setdefault((str(r["algo"]), int(r["world"]), int(r["count"])), {})[int(r["rank"])] = float(
            r["value"]
        )
    return out


def _golden(rows) -> dict[tuple[str, int], dict[str, float]]:
    part = rows[(rows["metric"] == "max_abs_error") & ~rows["case"].astype(str).str.startswith("mistake.")]
    out: dict[tuple[str, int], dict[str, float]] = {}
    for _, r in part.iterrows():
        value = float(r["value"])
        out.setdefault((str(r["algo"]), int(r["world"])), {})[str(r["case"])] = (
            value if math.isfinite(value) else 1.0
        )
    return out


def _tolerance(expectations) -> float | None:
    if expectations is None or not len(expectations):
        return None
    tol = expectations[(expectations["metric"] == "max_abs_error") & (expectations["case"] == "grads")][
        "value"
    ]
    return float(tol.iloc[0]) if len(tol) else None
