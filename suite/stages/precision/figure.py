"""Mixed-precision figure: the four training runs' loss curves (fp32, bf16, fp16 unscaled, fp16+GradScaler)
beside the range probe's lost gradients (zeroed and non-finite elements per format)."""

from __future__ import annotations

from matplotlib.figure import Figure

from reports.figures._plot import finish, grouped_bars

FACTS: tuple[str, ...] = ()
"""The facts these figures read (of the manifest's facts and the profile): the figure cache's key holds only
these."""

RUNS = (("fp32", "black"), ("bf16", "tab:green"), ("fp16_unscaled", "tab:red"), ("fp16_scaler", "tab:blue"))


def figures(rows, expectations, facts) -> list[Figure]:
    if rows is None or not len(rows):
        return []
    losses = rows[(rows["case"] == "train") & (rows["metric"] == "loss")]
    if not len(losses):
        return []
    fig = Figure(figsize=(9, 3.6))
    curves, probe = fig.subplots(1, 2)
    for run, colour in RUNS:
        part = losses[losses["dtype"] == run].sort_values("repeat")
        if len(part):
            curves.plot(part["repeat"], part["value"], color=colour, label=run, linewidth=1.2)
    curves.set_xlabel("step")
    curves.set_ylabel("loss (nats)")
    curves.set_title("Loss: fp32 vs bf16 vs fp16 ± GradScaler")
    curves.legend(fontsize=7)
    labels, zeroed, nonfinite = [], [], []
    for case in ("probe.underflow", "probe.overflow"):
        for dtype in ("fp32", "bf16", "fp16"):
            part = rows[(rows["case"] == case) & (rows["dtype"] == dtype)]
            get = {
                m: float(part[part["metric"] == m]["value"].iloc[0])
                for m in ("grads_zeroed", "grads_nonfinite")
                if len(part[part["metric"] == m])
            }
            if get:
                labels.append(f"{case.split('.')[1]}\n{dtype}")
                zeroed.append(get.get("grads_zeroed", 0.0))
                nonfinite.append(get.get("grads_nonfinite", 0.0))
    if labels:
        xs = range(len(labels))
        grouped_bars(
            probe, xs, [("became 0", zeroed, "tab:orange"), ("inf/NaN", nonfinite, "tab:purple")], width=0.4
        )
        probe.set_xticks(list(xs), labels, fontsize=7)
        probe.set_ylabel("gradient elements")
        probe.set_title("Range probe: gradients lost without scaling")
        probe.legend(fontsize=7)
    else:
        probe.axis("off")
    return [
        finish(
            fig,
            caption="Good: the bf16 and fp16+GradScaler loss curves on top of fp32's; the probe shows "
            "fp16 losing gradients without scaling and bf16 keeping them.",
        )
    ]
