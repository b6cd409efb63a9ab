"""Pinned-memory figure: host↔device GB/s, pageable vs pinned, both ways, against the PCIe expectation; and
the CUDA-event timeline of a GEMM on the default stream with a copy on a side stream (pinned, then
pageable)."""

from __future__ import annotations

from matplotlib.figure import Figure

from reports.figures._plot import finish

FACTS: tuple[str, ...] = ()
"""The facts these figures read (of the manifest's facts and the profile): the figure cache's key holds only
these."""


def figures(rows, expectations, facts) -> list[Figure]:
    if rows is None or not len(rows):
        return []
    bw = rows[rows["case"] == "bandwidth"]
    tl = rows[rows["case"] == "timeline"]
    if not len(bw) and not len(tl):
        return []
    fig = Figure(figsize=(9, 3.6))
    rates, timeline = fig.subplots(1, 2)
    labels, values, colours = [], [], []
    for direction in ("h2d", "d2h"):
        for memory, colour in (("pageable", "tab:orange"), ("pinned", "tab:blue")):
            hit = bw[(bw["placement"] == direction) & (bw["source"] == memory)]["value"]
            if len(hit):
                labels.append(f"{direction}\n{memory}")
                values.append(float(hit.iloc[0]))
                colours.append(colour)
    rates.bar(labels, values, color=colours)
    if expectations is not None and len(expectations):
        floor = expectations[expectations["metric"] == "GBps"]["value"]
        if len(floor):
            rates.axhline(float(floor.iloc[0]), color="red", linestyle="--", label="70 % of the PCIe link")
            rates.legend(fontsize=7)
    rates.set_ylabel("GB/s")
    rates.set_title("Host↔device copies")
    lanes = []
    for memory in ("pinned", "pageable"):
        for lane, colour in (("gemm", "tab:green"), ("copy", "tab:purple")):
            part = tl[(tl["source"] == memory) & (tl["algo"] == lane)]
            start = part[part["metric"] == "start_s"]["value"]
            end = part[part["metric"] == "end_s"]["value"]
            if len(start) and len(end):
                y = len(lanes)
                lanes.append(f"{memory}: {lane}")
                s0, e0 = float(start.iloc[0]) * 1e3, float(end.iloc[0]) * 1e3
                timeline.barh(y, e0 - s0, left=s0, color=colour)
    timeline.set_yticks(range(len(lanes)), lanes, fontsize=7)
    timeline.set_xlabel("ms after the origin event")
    timeline.set_title("Copy (side stream) vs GEMM (default stream)")
    return [
        finish(
            fig,
            caption="Good: pinned bars above pageable ones and above the red line; on the timeline the "
            "pinned copy runs under the GEMM, the pageable one after it.",
        )
    ]
