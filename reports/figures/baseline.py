"""Baseline figure: the one-device step beside what the model predicts — peak memory against the
model state (parameters, gradients, AdamW moments), and on a GPU the MFU against its floor."""

from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")

from matplotlib.figure import Figure  # noqa: E402

from ._scaling import series  # noqa: E402


def figures(rows, expectations, facts) -> list[Figure]:
    if rows is None or not len(rows):
        return []
    step = series(rows, "step_time_s", "tp").get(1)
    tokens = series(rows, "tokens_per_s", "tp").get(1)
    peak = series(rows, "peak_memory_bytes", "tp").get(1)
    if step is None:
        return []
    state = series(expectations, "model_state_bytes", "tp").get(1) if len(expectations) else None
    mfu = series(rows, "mfu", "tp").get(1)
    fig = Figure(figsize=(8, 3.6))
    left, right = fig.subplots(1, 2)
    labels, values = ["measured peak"], [(peak or 0) / 2**20]
    if state is not None:
        labels.append("model state (expected)")
        values.append(state / 2**20)
    left.bar(labels, values, color=["tab:blue", "tab:grey"][: len(values)])
    left.set_ylabel("MiB")
    left.set_title("Memory of one device")
    mfu_floor = series(expectations, "mfu", "tp").get(1) if len(expectations) else None
    if mfu is not None and math.isfinite(mfu):
        right.bar(["MFU"], [mfu * 100], color="tab:green")
        if mfu_floor:
            right.axhline(mfu_floor * 100, color="red", linestyle="--", label=f"floor {mfu_floor:.0%}")
            right.legend(fontsize=7)
        right.set_ylabel("% of bf16 dense peak")
        right.set_title("Model FLOPs utilisation")
    else:
        right.axis("off")
        right.text(0.0, 0.5, f"step {step * 1e3:.3g} ms\n{tokens:,.0f} tokens/s\n(no MFU: no GPU peak)",
                   fontsize=11, va="center")
    fig.suptitle(f"Baseline, TP=1: {step * 1e3:.3g} ms per step, {tokens:,.0f} tokens/s")
    fig.tight_layout()
    return [fig]
