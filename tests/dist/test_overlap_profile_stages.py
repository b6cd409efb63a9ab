"""The overlap and profile stages as the gloo-cpu rehearsal ran them: one launch each, many assertions."""

from __future__ import annotations

import json

import pytest

from suite.parsers import traces
from suite.results import RunDir

pytestmark = pytest.mark.dist


@pytest.fixture(scope="module")
def run(rehearsal_run):
    """The session's gloo-cpu rehearsal (tests/conftest.py): both stages ran there, one launch each."""
    return RunDir.load(rehearsal_run)


def rows_of(run, stage):
    return [r for r in run.rows() if r.stage == stage]


def verdicts_of(run, stage):
    return {v.id: v for v in run.verdicts() if v.stage == stage}


def test_every_mode_reduces_the_gradients_one_process_computes(run):
    v = verdicts_of(run, "overlap")
    grads = {k: x for k, x in v.items() if k.startswith("overlap.grads.")}
    assert set(grads) == {
        "overlap.grads.no_overlap",
        "overlap.grads.bucket_0.01MB",
        "overlap.grads.bucket_25MB",
        "overlap.grads.bucket_100MB",
    }
    assert {x.status for x in grads.values()} == {"pass"}, [x.observed for x in grads.values()]
    diffs = [r.value for r in rows_of(run, "overlap") if r.metric.startswith("max_grad_diff")]
    assert len(diffs) == 8 and max(diffs) < 1e-6


def test_bucket_layout_model_matches_ddps_buckets(run):
    rows = rows_of(run, "overlap")
    expected = {
        e.overlap: e.value for e in run.expectations() if e.stage == "overlap" and e.metric == "buckets"
    }
    measured = {r.overlap: r for r in rows if r.metric == "buckets"}
    assert set(measured) == {"bucket_0.01MB", "bucket_25MB", "bucket_100MB"}
    for label, row in measured.items():
        assert row.value == expected[label], (label, row.text)
        assert sum(int(x) for x in row.text.split()) == 41_280 * 4  # every float32 gradient, once
    assert measured["bucket_0.01MB"].value > 1 and measured["bucket_25MB"].value == 1


def test_step_times_and_their_differences(run):
    rows = rows_of(run, "overlap")
    steps = {r.overlap: r.value for r in rows if r.metric == "step_time_s"}
    assert set(steps) == {"no_overlap", "bucket_0.01MB", "bucket_25MB", "bucket_100MB"}
    assert all(0 < s < 60 for s in steps.values())
    saving = {r.overlap: r.value for r in rows if r.metric == "step_time_saving_s"}
    assert set(saving) == set(steps) - {"no_overlap"}
    for label, value in saving.items():
        assert value == pytest.approx(steps["no_overlap"] - steps[label])
    assert {r.overlap for r in rows if r.metric == "predicted_hidden_comm_s"} == set(saving)
    assert {x.status for k, x in verdicts_of(run, "overlap").items() if k.startswith("overlap.speed.")} == {
        "skip"
    }


def test_profile_analyses_every_ranks_cpu_trace(run):
    rows = rows_of(run, "profile")
    by = {(r.rank, r.metric): r.value for r in rows if r.metric != "step_time_s"}
    for rank in range(4):
        comm, compute, both = by[(rank, "comm_us")], by[(rank, "compute_us")], by[(rank, "overlap_us")]
        assert comm > 0 and compute > 0 and 0 <= both <= min(comm, compute)
        assert by[(rank, "overlap_pct")] == pytest.approx(100 * both / comm)
        trace = run.path / "raw" / "profile" / f"rank{rank}.trace.json.gz"
        (parsed,) = traces.parse_file(trace)["ranks"]  # what `python -m suite parse trace` prints
        assert parsed["rank"] == rank and parsed["comm_us"] == pytest.approx(comm, abs=1e-3)
    v = verdicts_of(run, "profile")
    assert v["profile.traces"].status == "pass" and v["profile.capture"].status == "pass"
    assert {v[f"profile.overlap.rank{r}"].status for r in range(4)} == {"skip"}


def test_timeline_published_and_figures_render(run):
    from reports.figures import stage_figures
    from reports.runview import load_run

    timeline = run.facts()["trace_timeline"]
    assert [r["rank"] for r in timeline["ranks"]] == [0, 1, 2, 3]
    assert all(r["compute"] and r["length_us"] > 0 for r in timeline["ranks"])
    view = load_run(run.path)
    facts = {**view.manifest["facts"], "profile": view.manifest["profile"]}
    for stage, count in (("overlap", 3), ("profile", 2)):  # overlap: steps, savings, the buckets' timeline
        out = stage_figures(
            stage,
            view.rows[view.rows["stage"] == stage],
            view.expectations[view.expectations["stage"] == stage],
            facts,
        )
        assert not out.notes and len(out.figures) == count
    json.dumps(timeline)  # plain JSON in the manifest
