"""Burn-in figures: each rank's TFLOP/s over the run per dtype (the peers' median and the warn/fail marks
beside it), and per GPU its SM/memory clocks, power and temperature over time from the sampler (`t` in
seconds), the samples where a brake was active marked red. Good looks like flat lines of one height: clocks
that fall as the GPU heats, or one GPU below the others, are what the burn-in exists to show."""

from __future__ import annotations

from matplotlib.figure import Figure

from reports.figures._plot import finish, limit, style

FACTS: tuple[str, ...] = ("profile",)
"""The facts these figures read (the figure cache's key holds only these)."""

# suite/stages/burnin/rules.py's marks (the report does not import the stages)
PEER_WARN, PEER_FAIL = (
    0.10,
    0.25,
)
# HW slowdown, SW/HW thermal, HW power brake: suite/hardware/gpu_sampler.FAIL_MASK
BRAKE_MASK = 0x8 | 0x20 | 0x40 | 0x80
MAX_GPU_FIGURES = 16


def _tflops_figure(rows, on_gpu: bool) -> Figure | None:
    windows = rows[(rows["case"] == "window") & (rows["metric"] == "tflops")]
    if not len(windows):
        return None
    dtypes = sorted(windows["dtype"].dropna().unique())
    fig = Figure(figsize=(5 * len(dtypes), 3.4))
    axes = fig.subplots(1, len(dtypes), squeeze=False)[0]
    who = "GPU" if on_gpu else "rank"
    for ax, dtype in zip(axes, dtypes):
        sel = windows[windows["dtype"] == dtype]
        for rank in sorted(sel["rank"].dropna().unique()):
            mine = sel[sel["rank"] == rank].sort_values("t")
            ax.plot(
                mine["t"].astype(float), mine["value"].astype(float), marker=".", label=f"{who} {int(rank)}"
            )
        median = float(sel["value"].median())
        limit(ax, (1 - PEER_WARN) * median, f"{PEER_WARN:.0%} below the median (warns)", color="orange")
        limit(ax, (1 - PEER_FAIL) * median, f"{PEER_FAIL:.0%} below (fails)")
        style(ax, title=f"{dtype} chain", xlabel="seconds into the phase", ylabel="TFLOP/s", legend=None)
        ax.legend(fontsize=6, loc="lower right", ncol=2)
    note = "" if on_gpu else " (CPU ranks: the numbers mean nothing)"
    fig.suptitle(f"Sustained TFLOP/s per {who} over the burn-in{note}", fontsize=10)
    return finish(
        fig, caption=f"Good: every {who}'s line flat and at one height, none below the dashed marks."
    )


def _gpu_figure(samples, gpu: int) -> Figure:
    fig = Figure(figsize=(7, 3.2))
    ax = fig.subplots()
    mine = samples[samples["rank"] == gpu]
    for metric, label in (("sm_MHz", "SM clock"), ("mem_MHz", "memory clock")):
        s = mine[mine["metric"] == metric].sort_values("t")
        if len(s):
            ax.plot(s["t"].astype(float), s["value"].astype(float), label=label)
    braked = mine[(mine["metric"] == "reasons")]
    braked = braked[braked["value"].astype(int) & BRAKE_MASK != 0]
    for t in braked["t"].astype(float):
        ax.axvline(t, color="red", alpha=0.3, linewidth=0.8)
    twin = ax.twinx()
    for metric, label, colour in (
        ("power_W", "power W", "tab:green"),
        ("temp_C", "temperature °C", "tab:purple"),
    ):
        s = mine[mine["metric"] == metric].sort_values("t")
        if len(s):
            twin.plot(
                s["t"].astype(float), s["value"].astype(float), label=label, color=colour, linestyle=":"
            )
    twin.set_ylabel("W / °C", fontsize=8)
    style(ax, title=f"GPU {gpu}", xlabel="seconds", ylabel="MHz", legend=None)
    lines = ax.get_legend_handles_labels()
    more = twin.get_legend_handles_labels()
    ax.legend(lines[0] + more[0], lines[1] + more[1], fontsize=6, loc="lower left")
    return finish(
        fig, caption="Good: clocks flat across the run and no red band (a hardware, thermal or power brake)."
    )


def figures(rows, expectations, facts) -> list[Figure]:
    if rows is None or not len(rows) or "case" not in rows:
        return []
    on_gpu = bool(facts.get("profile", {}).get("judge_performance", False))
    out = []
    tflops = _tflops_figure(rows, on_gpu)
    if tflops is not None:
        out.append(tflops)
    samples = rows[rows["case"] == "sampler"]
    for gpu in sorted(samples["rank"].dropna().unique())[:MAX_GPU_FIGURES]:
        out.append(_gpu_figure(samples, int(gpu)))
    return out
