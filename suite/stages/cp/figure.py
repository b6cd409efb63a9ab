"""cp figures: the golden comparison (worst |CP − full attention| per algorithm and degree) against its
tolerance and the bytes each rank sent against the formula; time per attention layer against sequence
length, and how much of the ring's K/V rotation hid behind compute."""

from __future__ import annotations

import math

from matplotlib.figure import Figure

from reports.figures._plot import finish, grouped_bars, limit, measured, new_figure, style

FACTS: tuple[str, ...] = ("profile",)
"""The facts these figures read (of the manifest's facts and the profile): the figure cache's key holds only
these."""


def _worst(frame, algo: str, world: int) -> float:
    v = frame[(frame["algo"] == algo) & (frame["world"] == world)]["value"].astype(float).max()
    return max(v, 1e-12) if math.isfinite(v) else math.nan  # 0 drawn at the floor of the log axis


def figures(rows, expectations, facts) -> list[Figure]:
    if rows is None or not len(rows):
        return []
    out = []
    golden = rows[(rows["metric"] == "max_abs_error") & ~rows["case"].astype(str).str.startswith("mistake.")]
    if len(golden):
        fig, (left, right) = new_figure(9, 3.8, 1, 2)
        keys = sorted({(str(r.algo), int(r.world)) for r in golden.itertuples()})
        left.bar(
            range(len(keys)), [_worst(golden, a, d) for a, d in keys], color="tab:blue", label="worst of 10"
        )
        tol = (
            expectations[
                (expectations["metric"] == "max_abs_error")
                & expectations["case"].astype(str).str.endswith(".output")
            ]["value"]
            if len(expectations)
            else []
        )
        if len(tol):
            limit(left, float(max(tol)), f"tolerance {float(max(tol)):.2g}")
        style(
            left,
            title="Golden: output, LSE, dq, dk, dv (float32)",
            ylabel="worst max |CP − full attention|",
            logy=True,
            xticks=range(len(keys)),
            xticklabels=[f"{a}\nCP={d}" for a, d in keys],
            grid="y",
        )
        sent = rows[rows["metric"] == "bytes_sent"]
        want = expectations[expectations["metric"] == "bytes_sent"] if len(expectations) else sent.iloc[0:0]
        formula = [
            want[(want["algo"] == r.algo) & (want["world"] == r.world)]["value"] for r in sent.itertuples()
        ]
        grouped_bars(
            right,
            range(len(sent)),
            [
                ("counted", sent["value"].astype(float), None),
                ("formula", [float(f.iloc[0]) if len(f) else math.nan for f in formula], "grey"),
            ],
            width=0.4,
        )
        style(
            right,
            title="Communication volume",
            ylabel="bytes sent per rank per forward",
            xticks=range(len(sent)),
            xticklabels=[f"{r.algo}\nCP={int(r.world)}" for r in sent.itertuples()],
            grid="y",
        )
        out.append(
            finish(
                fig,
                "Context parallelism: ring attention and Ulysses against one process",
                "Good: every golden bar below the red tolerance line, and the counted bytes equal to the "
                "formula's grey bars.",
            )
        )
    layer = rows[(rows["case"] == "layer") & (rows["metric"] == "time_s")]
    if len(layer):
        fig, (left, right) = new_figure(9, 3.8, 1, 2)
        for (algo, d), part in layer.groupby(["algo", "world"]):
            part = part.sort_values("count")
            measured(
                left, (part["count"].astype(int), part["value"].astype(float) * 1e3), f"{algo} CP={int(d)}"
            )
        style(
            left,
            title="Time per attention layer",
            xlabel="sequence length (tokens)",
            ylabel="ms per layer (forward + backward)",
            logx=2,
            logy=True,
        )
        for d, part in rows[rows["metric"] == "rotation_hidden"].groupby("world"):
            part = part.sort_values("count")
            measured(right, (part["count"].astype(int), part["value"].astype(float) * 100), f"CP={int(d)}")
        right.set_ylim(-5, 105)
        style(
            right,
            title="Ring: rotation behind compute",
            xlabel="sequence length (tokens)",
            ylabel="% of the K/V rotation hidden",
            logx=2,
        )
        judged = (facts or {}).get("profile", {}).get("judge_performance")
        out.append(
            finish(
                fig,
                "Context parallelism: timings" + ("" if judged else " (CPU: not judged)"),
                "Good: a layer's time growing with the sequence no faster than its square, and the ring "
                "hiding "
                "most of its K/V rotation (near 100 %) at long sequences.",
            )
        )
    return out
