"""Pipeline figures: the measured bubble of each schedule on the formula's curve (sleep stages, and the GPT
per PP degree), and the golden comparison of each schedule against its tolerance."""

from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")

from matplotlib.figure import Figure  # noqa: E402

from suite.costmodel.bubble import bubble_fraction, schedule_chunks  # noqa: E402

COLOURS = {"hand_1f1b": "tab:green", "gpipe": "tab:blue", "1f1b": "tab:orange", "interleaved_1f1b": "tab:purple"}


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
        fig.suptitle("Pipeline bubble: measured idle/total per rank against the formula")
        fig.tight_layout()
        out.append(fig)
    gpt = _bubble_points(rows, "gpt")
    degrees = sorted({p for (_, p) in gpt})
    if degrees:
        fig = Figure(figsize=(4 * len(degrees), 3.8))
        axes = fig.subplots(1, len(degrees), squeeze=False)[0]
        for ax, d in zip(axes, degrees):
            _bubble_axes(ax, {k: v for k, v in gpt.items() if k[1] == d}, chunks, f"GPT, PP={d}")
        fig.suptitle("Pipeline bubble of the GPT per schedule")
        fig.tight_layout()
        out.append(fig)
    memory = _memory(rows)
    if memory:
        fig = Figure(figsize=(8, 3.8))
        ax = fig.subplots()
        labels = sorted(memory)
        ranks = sorted({r for v in memory.values() for r in v})
        width = 0.8 / max(len(ranks), 1)
        for i, rank in enumerate(ranks):
            ax.bar([j + i * width for j in range(len(labels))],
                   [memory[k].get(rank, math.nan) / 2**30 for k in labels], width=width, label=f"rank {rank}")
        ax.set_xticks([j + width * (len(ranks) - 1) / 2 for j in range(len(labels))])
        ax.set_xticklabels([f"{s}\nPP={d} M={m}" for s, d, m in labels], fontsize=7)
        ax.set_ylabel("activation memory, GiB (peak − start of step)")
        ax.legend(fontsize=6, ncol=2)
        ax.grid(True, axis="y", alpha=0.3)
        fig.suptitle("Pipeline: activation memory per stage (1F1B holds ≤ P micro-batches, GPipe all M)")
        fig.tight_layout()
        out.append(fig)
    golden = _golden(rows)
    if golden:
        fig = Figure(figsize=(8, 3.8))
        ax = fig.subplots()
        labels = sorted(golden)
        cases = sorted({c for v in golden.values() for c in v})
        width = 0.8 / max(len(cases), 1)
        for i, case in enumerate(cases):
            ax.bar([j + i * width for j in range(len(labels))],
                   [max(golden[k].get(case, math.nan), 1e-12) for k in labels], width=width, label=case)
        tol = _tolerance(expectations)
        if tol:
            ax.axhline(tol, color="red", linestyle="--", label=f"tolerance (gradients) {tol:.2g}")
        ax.set_yscale("log")
        ax.set_xticks([j + width * (len(cases) - 1) / 2 for j in range(len(labels))])
        ax.set_xticklabels([f"{s}\nPP={d}" for s, d in labels], fontsize=7)
        ax.set_ylabel("max |pipeline − one process|")
        ax.legend(fontsize=7)
        ax.grid(True, axis="y", alpha=0.3)
        fig.suptitle("Pipeline schedules against one process (float32)")
        fig.tight_layout()
        out.append(fig)
    return out


def _bubble_points(rows, case: str) -> dict[tuple[str, int], list[tuple[int, float]]]:
    """{(schedule, P): [(M, idle share of one rank), …]}."""
    part = rows[(rows["case"] == case) & (rows["metric"] == "bubble")]
    out: dict[tuple[str, int], list[tuple[int, float]]] = {}
    for _, r in part.iterrows():
        value = float(r["value"])
        if math.isfinite(value):
            out.setdefault((str(r["algo"]), int(r["world"])), []).append((int(r["count"]), value))
    return out


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
        ax.plot(ms, [bubble_fraction(p, m, v) for m in ms], "--", color="grey" if v == 1 else "tab:purple", alpha=0.7,
                label=f"(P−1)/(M+P−1), P={p}" if v == 1 else f"(P−1)/(vM+P−1), P={p}, v={v}")
    for (schedule, p), pts in sorted(points.items()):
        ax.plot([m for m, _ in pts], [x for _, x in pts], MARKERS.get(schedule, "o"), color=COLOURS.get(schedule),
                label=f"{schedule} measured", markersize=5, alpha=0.8, fillstyle="none")
    ticks = sorted({m for pts in points.values() for m, _ in pts})
    ax.set_xscale("log", base=2)
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
        out.setdefault((str(r["algo"]), int(r["world"]), int(r["count"])), {})[int(r["rank"])] = float(r["value"])
    return out


def _golden(rows) -> dict[tuple[str, int], dict[str, float]]:
    part = rows[(rows["metric"] == "max_abs_error") & ~rows["case"].astype(str).str.startswith("mistake.")]
    out: dict[tuple[str, int], dict[str, float]] = {}
    for _, r in part.iterrows():
        value = float(r["value"])
        out.setdefault((str(r["algo"]), int(r["world"])), {})[str(r["case"])] = value if math.isfinite(value) else 1.0
    return out


def _tolerance(expectations) -> float | None:
    if expectations is None or not len(expectations):
        return None
    tol = expectations[(expectations["metric"] == "max_abs_error") & (expectations["case"] == "grads")]["value"]
    return float(tol.iloc[0]) if len(tol) else None
