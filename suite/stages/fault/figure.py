"""Fault figures: each scenario's timeline from the fault (detection, restart, regroup, resume, done) with the
measured seconds written on it — on a multi-node run the node-loss drill's lane too — and the losses of the
drill against the uninterrupted reference."""

from __future__ import annotations

from matplotlib.figure import Figure

from reports.figures._plot import finish, limit, new_figure, style
from suite.values import is_missing

FACTS: tuple[str, ...] = ("fault_drill",)
"""The facts these figures read (of the manifest's facts and the profile): the figure cache's key holds only
these."""

SCENARIOS = ("crash", "hang", "exception")
NODE_LOSS = (
    "node_loss"  # a multi-node run's drill (suite/stages/fault/node_loss.py): a whole node's agent killed
)
# (from, to, label, colour): the phases between the timeline's marks, seconds after the fault.
PHASES = (
    ("fault", "detect_s", "until a survivor raised", "#d62728"),
    ("detect_s", "restart_s", "until torchrun spawned attempt 1", "#ff7f0e"),
    ("restart_s", "regroup_s", "start-up, joining the new group", "#1f77b4"),
    ("regroup_s", "resume_s", "checkpoint loaded, first step", "#2ca02c"),
    ("resume_s", "done_s", "training to the end", "#bbbbbb"),
)
MARKS = (
    ("detect_s", "detected"),
    ("nudge_s", "drill SIGKILLs stopped rank"),
    ("restart_s", "restart"),
    ("regroup_s", "group up"),
    ("resume_s", "resumed"),
)
ZERO_FLOOR = 1e-10
"""Loss differences of exactly 0 are drawn here on the log axis."""


def figures(rows, expectations, facts) -> list[Figure]:
    if rows is None or not len(rows):
        return []
    out = []
    cases = set(rows["case"])  # on NCCL each scenario also ran under TORCH_NCCL_ASYNC_ERROR_HANDLING=1
    scenarios = [c for s in SCENARIOS for c in (s, f"{s}.async1") if c in cases] + [NODE_LOSS] * (
        NODE_LOSS in cases
    )
    if scenarios:
        out.append(timeline_figure(rows, scenarios, facts))
    if (rows["metric"] == "loss").any():
        out.append(loss_figure(rows, scenarios))
    return out


def _values(rows, scenario: str) -> dict[str, float]:
    part = rows[(rows["case"] == scenario) & rows["text"].isna()]
    return {m: float(v) for m, v in zip(part["metric"], part["value"]) if m != "loss"}


def timeline_figure(rows, scenarios: list[str], facts) -> Figure:
    drill = facts.get("fault_drill", {}) if facts else {}
    fig, ax = new_figure(11, 1.4 + 1.4 * len(scenarios))
    longest, labelled = 0.0, set()
    for y, scenario in enumerate(reversed(scenarios)):
        v = _values(rows, scenario)
        v["fault"] = 0.0
        for start, end, label, colour in PHASES + _node_loss_phase(v):
            a, b = v.get(start), v.get(end)
            if not is_missing(a) and not is_missing(b) and b >= a:
                ax.barh(
                    y, b - a, left=a, height=0.4, color=colour, label=None if label in labelled else label
                )
                labelled.add(label)
                longest = max(longest, b)
        reached = []
        for key, name in MARKS:
            x = v.get(key)
            if not is_missing(x):
                ax.plot([x], [y], "k|", markersize=16)
                reached.append(f"{name.replace(chr(10), ' ')} {x:.2f} s")
            # not measured there
            elif key != "nudge_s" and not (scenario == NODE_LOSS and key == "regroup_s"):
                reached.append(f"{name.replace(chr(10), ' ')}: not reached")
        ax.annotate("fault → " + " → ".join(reached), (0, y + 0.24), fontsize=7.5, va="bottom")
        error = _error(rows, scenario)
        if error:
            ax.annotate(error, (0, y - 0.24), fontsize=6.5, va="top", color="#555555")
    ax.axvline(0, color="black", linewidth=1)
    ax.set_yticks(range(len(scenarios)), [_lane(rows, s) for s in reversed(scenarios)])
    ax.set_ylim(-0.75, len(scenarios) - 0.25)
    ax.set_xlim(-0.02 * max(longest, 1.0), 1.05 * max(longest, 1.0))
    style(
        ax,
        xlabel="seconds after the fault",
        grid="x",
        legend=7 if labelled else None,
        loc="upper right",
        ncols=len(labelled),
        bbox_to_anchor=(1.0, -0.12),
    )
    where = (
        f"{drill.get('ranks', '?')} {drill.get('backend', '')} ranks, process-group timeout "
        f"{drill.get('pg_timeout_s', '?')} s"
        + (", the scenarios run at once" if drill.get("concurrent") else "")
    )
    return finish(
        fig,
        f"Fault timeline per scenario ({where}); a stopped rank is SIGKILLed by the drill, not torchrun",
        "Good: each fault detected well inside the process-group timeout, and training resumed from the "
        "last checkpoint.",
    )


def _node_loss_phase(v: dict[str, float]) -> tuple:
    """The node-loss drill has no group-up mark of its own: its restart → resume is one phase, the new
    rendezvous without the lost node and the checkpoint load together."""
    if "regroup_s" in v or "restart_s" not in v or "resume_s" not in v:
        return ()
    return (("restart_s", "resume_s", "new rendezvous without the lost node, checkpoint loaded", "#17becf"),)


def _lane(rows, scenario: str) -> str:
    """A lane's name; the node-loss lane says which node went and the ranks before → after."""
    if scenario != NODE_LOSS:
        return scenario
    part = rows[rows["case"] == NODE_LOSS]
    got = {m: (val, text) for m, val, text in zip(part["metric"], part["value"], part["text"])}
    lost = got.get("lost_node", (None, "a node"))[1]
    before, after = (got.get(k, (float("nan"), None))[0] for k in ("world_before", "world_after"))
    ranks = f"\n{before:.0f} → {after:.0f} ranks" if not is_missing(before) and not is_missing(after) else ""
    return f"{lost} lost{ranks}"


def _error(rows, scenario: str, width: int = 150) -> str:
    """The first line a survivor raised, shortened to fit under its lane."""
    part = rows[(rows["case"] == scenario) & (rows["metric"].isin(["error", "launch_error"]))]
    if not len(part):
        return ""
    text = " / ".join(str(t) for t in part["text"])
    return text if len(text) <= width else text[: width - 1] + "…"


def loss_figure(rows, scenarios: list[str]) -> Figure:
    losses = rows[rows["metric"] == "loss"]
    reference = losses[losses["case"] == "reference"].sort_values("repeat")
    ref = dict(zip(reference["repeat"].astype(int), reference["value"]))
    fig, (left, right) = new_figure(11, 4, 1, 2)
    if ref:
        left.plot(list(ref), list(ref.values()), "-", color="black", label="uninterrupted reference")
    tolerance = None
    for offset, scenario in enumerate(scenarios):
        part = losses[losses["case"] == scenario]
        v = _values(rows, scenario)
        tolerance = v.get("loss_tolerance", tolerance)
        for source, marker in (("attempt0", "o"), ("attempt1", "x")):
            points = part[part["source"] == source].sort_values("repeat")
            if not len(points):
                continue
            steps = points["repeat"].astype(int).tolist()
            left.plot(
                [s + 0.08 * (offset - 1) for s in steps],
                points["value"],
                marker,
                markersize=5,
                fillstyle="none",
                label=f"{scenario} {source.replace('attempt', 'attempt ')}",
            )
            diffs = [max(abs(val - ref[s]), ZERO_FLOOR) for s, val in zip(steps, points["value"]) if s in ref]
            right.plot(
                [s for s in steps if s in ref],
                diffs,
                marker + "-" if source == "attempt1" else marker,
                fillstyle="none",
                label=f"{scenario} {source.replace('attempt', 'attempt ')}",
            )
        if not is_missing(v.get("fault_step")):
            left.axvline(v["fault_step"], color="#d62728", linestyle=":", linewidth=1)
    style(left, title="loss per step (fault step dotted)", xlabel="step", ylabel="loss (nats)", legend=6)
    if not is_missing(tolerance):
        limit(right, tolerance, f"tolerance {tolerance:g}", color="grey")
    style(
        right,
        title=f"difference from the reference (0 drawn at {ZERO_FLOOR:g})",
        xlabel="step",
        ylabel="|loss − reference| (nats)",
        logy=True,
        legend=6,
    )
    return finish(
        fig,
        "Resumed training against the uninterrupted run of the same seed",
        "Good: after the resume the loss matches the uninterrupted run (differences below the tolerance).",
    )
