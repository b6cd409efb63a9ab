"""The bandwidth and crossover stages inside the rehearsal (the session's one run, shared with
test_rehearsal)."""

from __future__ import annotations

import math

from suite.results import RunDir


def test_bandwidth_stage_in_the_rehearsal(rehearsal_run):
    run = RunDir.load(rehearsal_run)
    verdicts = {v.id: v for v in run.verdicts() if v.stage == "bandwidth"}
    assert verdicts["bandwidth.torch_sweep"].status == "pass"
    wrong = {k: v.status for k, v in verdicts.items() if k.startswith("bandwidth.wrong.")}
    assert len(wrong) >= 6, wrong  # one per collective the sweep checks, at least
    assert set(wrong.values()) == {"pass"}, wrong
    assert verdicts["bandwidth.performance"].status == "skip"
    fit = run.manifest["facts"]["alpha_beta"]
    assert fit["source"] == "torch" and fit["world"] == 4
    assert fit["alpha_s"] >= 0 and math.isfinite(fit["beta_Bps"]) and fit["beta_Bps"] > 0
    rows = [r for r in run.rows() if r.stage == "bandwidth"]
    assert {r.case for r in rows if r.metric == "busbw" and r.source == "torch"} >= {
        "all_reduce",
        "all_gather",
        "reduce_scatter",
        "all_to_all",
        "broadcast",
        "sendrecv",
    }
    assert {r.case for r in rows if r.case.startswith("overhead.")} == {"overhead.harness", "overhead.bare"}
    assert (rehearsal_run / "raw" / "bandwidth" / "torch.rank0.log").exists()


def test_crossover_stage_in_the_rehearsal(rehearsal_run):
    run = RunDir.load(rehearsal_run)
    verdicts = {v.id: v for v in run.verdicts() if v.stage == "crossover"}
    for check in ("correct.ring", "correct.tree", "bytes.ring", "bytes.tree"):
        assert verdicts[f"crossover.{check}"].status == "pass", verdicts[f"crossover.{check}"]
    assert verdicts["crossover.crossover"].status == "skip"
    assert "predicted" in verdicts["crossover.crossover"].observed
    predicted = [e for e in run.expectations() if e.stage == "crossover" and e.metric == "crossover_bytes"]
    assert len(predicted) == 1 and predicted[0].basis.startswith("S* = αβ")


def test_report_draws_the_curves_and_the_fit(rehearsal_run):
    html = (rehearsal_run / "report.html").read_text()
    for alt in ("Bus bandwidth by message size", "α-β fit of all_reduce", "Ring vs tree all-reduce"):
        assert alt in html
