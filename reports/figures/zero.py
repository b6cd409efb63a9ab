"""ZeRO figures: memory per rank for DDP and ZeRO-1/2/3 — measured peak, measured model state, and
the model's expected state bytes side by side — with each stage's step time; then the golden comparison."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

from matplotlib.figure import Figure  # noqa: E402

from ._scaling import golden_panel, series, tolerance_from  # noqa: E402

NAMES = {0: "DDP", 1: "ZeRO-1", 2: "ZeRO-2", 3: "ZeRO-3"}


def figures(rows, expectations, facts) -> list[Figure]:
    if rows is None or not len(rows):
        return []
    out = []
    peak = series(rows, "peak_memory_bytes", "zero")
    state = series(rows, "state_memory_bytes", "zero")
    model = series(expectations, "state_memory_bytes", "zero") if len(expectations) else {}
    steps = series(rows, "step_time_s", "zero")
    stages = sorted(set(peak) | set(state) | set(model))
    if stages:
        fig = Figure(figsize=(10, 3.8))
        left, right = fig.subplots(1, 2, gridspec_kw={"width_ratios": [3, 2]})
        width = 0.27
        for i, (label, values, color) in enumerate((("measured peak", peak, "tab:blue"),
                                                    ("measured model state", state, "tab:cyan"),
                                                    ("expected model state", model, "tab:grey"))):
            left.bar([j + (i - 1) * width for j in range(len(stages))],
                     [values.get(z, 0) / 2**20 for z in stages], width=width, label=label, color=color)
        left.set_xticks(range(len(stages)))
        left.set_xticklabels([NAMES.get(z, str(z)) for z in stages])
        left.set_ylabel("MiB per rank")
        left.set_title("Memory per rank")
        left.legend(fontsize=7)
        left.grid(True, axis="y", alpha=0.3)
        if steps:
            right.bar([NAMES.get(z, str(z)) for z in steps], [v * 1e3 for v in steps.values()], color="tab:purple")
            if 0 in steps:
                right.axhline(steps[0] * 1.5e3, color="red", linestyle="--", label="1.5 × DDP")
                right.legend(fontsize=7)
        right.set_ylabel("ms per step")
        right.set_title("Step time")
        fig.suptitle("ZeRO: memory per rank beside the model, and step time")
        fig.tight_layout()
        out.append(fig)
    fig = Figure(figsize=(8, 3.6))
    if golden_panel(fig.subplots(), rows, "zero", "ZeRO", tolerance_from(expectations)):
        fig.suptitle("ZeRO: parameters after AdamW steps vs one process (ZeRO=0 is DDP)")
        fig.tight_layout()
        out.append(fig)
    return out
