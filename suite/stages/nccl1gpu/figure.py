"""NCCL-on-one-card figure: the async all_reduce behind a GEMM chain (host time of enqueue, wait() and
synchronize() against the chain's device time), and gloo with CUDA tensors: |CUDA − CPU| per collective."""

from __future__ import annotations

from matplotlib.figure import Figure

from reports.figures._plot import finish, log_axis

FACTS: tuple[str, ...] = ()
"""The facts these figures read (of the manifest's facts and the profile): the figure cache's key holds only
these."""


def figures(rows, expectations, facts) -> list[Figure]:
    if rows is None or not len(rows):
        return []
    asy = rows[rows["case"] == "async"]
    gloo = rows[(rows["source"] == "gloo") & (rows["metric"] == "max_abs_diff_vs_cpu")]
    if not len(asy) and not len(gloo):
        return []
    fig = Figure(figsize=(9, 3.4))
    left, right = fig.subplots(1, 2)
    names = [
        ("enqueue_s", "enqueue"),
        ("wait_host_s", "wait()"),
        ("sync_host_s", "synchronize()"),
        ("gemm_device_s", "GEMM chain (device)"),
    ]
    labels, values = [], []
    for metric, label in names:
        hit = asy[asy["metric"] == metric]["value"]
        if len(hit):
            labels.append(label)
            values.append(float(hit.iloc[0]) * 1e3)
    left.bar(labels, values, color=["tab:grey", "tab:blue", "tab:orange", "tab:green"][: len(values)])
    left.set_ylabel("ms")
    left.tick_params(axis="x", labelsize=7)
    left.set_title("async_op=True: wait() vs synchronize()")
    if len(gloo):
        worst = gloo.groupby("case")["value"].max()
        right.bar(list(worst.index), [max(float(v), 1e-12) for v in worst.values], color="tab:blue")
        log_axis(right, "y")
        right.tick_params(axis="x", labelsize=6, rotation=45)
        right.set_ylabel("max |CUDA − CPU| (0 drawn at 1e-12)")
        right.set_title("gloo collectives on CUDA tensors")
    else:
        right.axis("off")
    return [
        finish(
            fig,
            caption="Good: enqueue and wait() short, synchronize() as long as the GEMM chain; every gloo "
            "bar at the 1e-12 floor (CUDA and CPU results equal).",
        )
    ]
