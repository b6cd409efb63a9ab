"""The node-loss drill's rows and verdicts (suite/stages/fault/node_loss.py) on the events of a real run on
the two-node namespace cluster (tests/data/node-loss/README.md), and on the same events with parts of the
recovery removed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from suite.config import get_profile
from suite.stages.fault.node_loss import judge, rows_from_events

DATA = Path(__file__).resolve().parents[1] / "data" / "node-loss"
EVENTS = [
    json.loads(line)
    for name in ("node-a-events.rank0.jsonl", "node-b-events.rank1.jsonl")
    for line in (DATA / name).read_text().splitlines()
]
FACTS = {"profile": get_profile("gloo-cpu", 1).with_overrides(nodes=("node-a", "node-b")).to_dict()}


def by_metric(rows):
    return {r.metric: r for r in rows}


def test_the_capture_holds_both_attempts():
    assert len(EVENTS) > 15 and {e["attempt"] for e in EVENTS} == {0, 1}
    assert [e["node"] for e in EVENTS if e["event"] == "fault"] == ["node-b"]


def test_rows_from_the_real_drill():
    got = by_metric(rows_from_events(EVENTS, "node-b"))
    fault_t = next(e["t"] for e in EVENTS if e["event"] == "fault")
    error_t = next(e["t"] for e in EVENTS if e["event"] == "error")
    assert got["detect_s"].value == pytest.approx(error_t - fault_t) and 0 < got["detect_s"].value < 1
    assert "Connection reset by peer" in got["error"].text and got["error"].text.startswith(
        "node-a: RuntimeError"
    )
    assert got["detect_s"].value < got["restart_s"].value < got["resume_s"].value
    assert (
        got["world_before"].value,
        got["world_after"].value,
        got["resumed_step"].value,
        got["done_ranks"].value,
    ) == (2, 1, 4, 1)
    assert got["replay_diff"].value == 0.0 and got["replay_diff"].text == "1 replayed step losses"


def test_verdicts_pass_on_the_real_drill():
    verdicts = {v.id: v for v in judge(rows_from_events(EVENTS, "node-b"), FACTS)}
    assert {k: v.status for k, v in verdicts.items()} == {
        "fault.node_loss.detect": "pass",
        "fault.node_loss.resume": "pass",
        "fault.node_loss.loss": "pass",
    }
    assert verdicts["fault.node_loss.resume"].observed.startswith(
        "resumed at step 4 on 1 of 2 ranks, 1 finished"
    )


def test_no_survivor_error_no_restart_a_wrong_replay_each_fail():
    no_error = [e for e in EVENTS if e["event"] != "error"]
    first_only = [e for e in EVENTS if e["attempt"] == 0]
    drifted = [
        dict(e, loss=e["loss"] + 1e-3) if e["event"] == "step" and e["attempt"] == 1 else e for e in EVENTS
    ]
    cases = {
        "no_error": (no_error, {"fault.node_loss.detect": "fail"}),
        "first_only": (first_only, {"fault.node_loss.resume": "fail", "fault.node_loss.loss": "fail"}),
        "drifted": (drifted, {"fault.node_loss.loss": "fail"}),
    }
    for name, (events, failing) in cases.items():
        statuses = {
            v.id: v.status for v in judge(rows_from_events(events, "node-b", "torchrun exited 1"), FACTS)
        }
        assert len(statuses) == 3, name
        assert {k: s for k, s in statuses.items() if s != "pass"} == failing, name
    (resume,) = [
        v
        for v in judge(rows_from_events(first_only, "node-b", "torchrun exited 1"), FACTS)
        if v.id == "fault.node_loss.resume"
    ]
    assert resume.observed == "no restarted attempt: torchrun exited 1" and "shared" not in resume.observed
    assert "their own node's checkpoint" in resume.reason


def test_one_node_has_no_node_loss_verdicts():
    one = {"profile": get_profile("gloo-cpu", 1).to_dict()}
    assert judge(rows_from_events(EVENTS, "node-b"), one) == []
    (missing,) = judge([], FACTS)
    assert missing.id == "fault.node_loss" and missing.status == "fail"


def test_the_fault_timeline_draws_the_node_loss_lane_from_the_real_drill():
    """The report's fault timeline (suite/stages/fault/figure.py) gets a lane for the lost node: its phases
    from the loss to the resume, the node and the ranks before → after named, the measured seconds written on
    it."""
    import pandas as pd

    from suite.stages.fault import figure as fault_figures

    rows = rows_from_events(EVENTS, "node-b")
    got = by_metric(rows)
    figs = fault_figures.figures(pd.DataFrame([r.to_dict() for r in rows]), [], {"fault_drill": {"ranks": 1}})
    assert len(figs) == 1
    ax = figs[0].axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["node-b lost\n2 → 1 ranks"]
    bars = sorted((p.get_x(), p.get_x() + p.get_width()) for p in ax.patches)
    assert bars == [
        pytest.approx((0.0, got["detect_s"].value)),
        pytest.approx((got["detect_s"].value, got["restart_s"].value)),
        pytest.approx((got["restart_s"].value, got["resume_s"].value)),
    ]
    (note,) = [t.get_text() for t in ax.texts if t.get_text().startswith("fault → ")]
    assert (
        f"detected {got['detect_s'].value:.2f} s" in note and f"resumed {got['resume_s'].value:.2f} s" in note
    )
    assert "not reached" not in note  # the drill has no group-up mark of its own
