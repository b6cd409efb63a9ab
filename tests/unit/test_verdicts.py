"""The verdict vocabulary: one builder every stage uses, one severity order, one summary line."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from reports import report
from suite.commands import check
from suite.results import VERDICT_STATUSES, Verdict, status_counts
from suite.runner import RunOutcome
from suite.verdicts import (
    CPU_SAYS_NOTHING,
    SEVERITY,
    SEVERITY_RANK,
    failed_stages,
    summary_line,
    verdicts_for,
)

REPO = Path(__file__).resolve().parents[2]


def test_the_builder_names_the_stage_and_the_status():
    v = verdicts_for("bandwidth")
    made = [
        v.passed("fit", expected="e", observed="o", reason="r"),
        v.warn("dip.torch", expected="e", observed="o", reason="r"),
        v.fail("peak.all_reduce", expected="e", observed="o", reason="r"),
        v.skip("nccl_tests", expected="e", observed="o", reason="r"),
        v.verdict("nccl_tests.all_gather", "skip", expected="e", observed="o", reason="r"),
    ]
    assert [(m.id, m.stage, m.status) for m in made] == [
        ("bandwidth.fit", "bandwidth", "pass"),
        ("bandwidth.dip.torch", "bandwidth", "warn"),
        ("bandwidth.peak.all_reduce", "bandwidth", "fail"),
        ("bandwidth.nccl_tests", "bandwidth", "skip"),
        ("bandwidth.nccl_tests.all_gather", "bandwidth", "skip"),
    ]
    assert made[0] == Verdict(
        id="bandwidth.fit", stage="bandwidth", status="pass", expected="e", observed="o", reason="r"
    )


def test_check_picks_the_status_and_the_reason():
    v = verdicts_for("tp")
    ok = v.check("scaling", True, bad="warn", expected="e", observed="o", reason_ok="good", reason_bad="bad")
    worse = v.check(
        "scaling", False, bad="warn", expected="e", observed="o", reason_ok="good", reason_bad="bad"
    )
    failed = v.check("golden.tp2", False, expected="e", observed="o", reason="same either way")
    assert (ok.status, ok.reason) == ("pass", "good")
    assert (worse.status, worse.reason) == ("warn", "bad")
    assert (failed.status, failed.reason) == ("fail", "same either way")


@pytest.mark.parametrize("reasons", [{}, {"reason_ok": "a"}, {"reason": "r", "reason_bad": "b"}])
def test_check_refuses_an_ambiguous_reason(reasons):
    with pytest.raises(TypeError):
        verdicts_for("tp").check("scaling", True, expected="e", observed="o", **reasons)


def test_check_refuses_a_bad_status_that_is_not_one():
    with pytest.raises(ValueError, match="'fail' or 'warn'"):
        verdicts_for("tp").check("scaling", False, bad="skip", expected="e", observed="o", reason="r")


def test_cpu_skip_says_cpu_numbers_say_nothing():
    v = verdicts_for("dp").cpu_skip("decay", "per-rank efficiency ≥ 80%")
    assert (v.id, v.status, v.observed, v.reason) == ("dp.decay", "skip", "measured on CPU", CPU_SAYS_NOTHING)
    assert verdicts_for("dp").cpu_skip("decay", "x", "2 ranks: 0.9").observed == "2 ranks: 0.9"


def test_one_severity_order_for_check_and_the_report():
    assert SEVERITY == ("fail", "warn", "pass", "skip")
    assert sorted(SEVERITY) == sorted(VERDICT_STATUSES)
    assert check.ORDER is SEVERITY_RANK
    assert not hasattr(report, "BOARD_ORDER")
    verdicts = [
        verdicts_for("topology").verdict(f"c{i}", s, expected="", observed="", reason="")
        for i, s in enumerate(("skip", "pass", "warn", "fail", "pass"))
    ]
    assert [row.status for row in report.board(verdicts)] == ["fail", "warn", "pass", "pass", "skip"]
    table = report.verdict_table(verdicts)
    assert [row[1].text for row in table.rows] == ["fail", "warn", "pass", "pass", "skip"]


def test_one_summary_line_for_the_runner_the_report_and_check(tmp_path):
    counts = status_counts(
        [
            verdicts_for("x").verdict(str(i), s, expected="", observed="", reason="")
            for i, s in enumerate(("pass", "pass", "warn", "skip", "skip", "skip"))
        ]
    )
    line = "2 passed, 1 warned, 0 failed, 3 skipped"
    assert summary_line(counts) == line
    assert RunOutcome(run=None, counts=counts, seconds=0.0).summary() == line
    assert report.summary(counts) == line


def stage_modules() -> list[Path]:
    return sorted((REPO / "suite" / "stages").rglob("*.py")) + [REPO / "suite" / "topology_rules.py"]


def test_no_stage_module_builds_a_verdict_by_hand():
    """Every stage's verdicts come from suite.verdicts' builder, which spells the id and the stage once."""
    modules = [p for p in stage_modules() if p.exists()]
    assert len(modules) >= 10
    by_hand = []
    for path in modules:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if isinstance(node, ast.Call):
                name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", None)
                if name == "Verdict":
                    by_hand.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert by_hand == [], "build these with suite.verdicts.verdicts_for(NAME): " + ", ".join(by_hand)


def test_failed_stages_are_a_fail_verdict_or_an_error_and_unfinished_ones_on_request():
    def v(stage: str, status: str) -> Verdict:
        return Verdict(id=f"{stage}.x", stage=stage, status=status, expected="", observed="", reason="")

    manifest = {
        "stages": {
            "topology": {"status": "complete"},
            "bandwidth": {"status": "error"},
            "fault": {"status": "running"},  # an interrupted run
            "pp": {},
        }
    }
    judged = [v("burnin", "fail"), v("health", "warn"), v("topology", "pass")]
    assert failed_stages(manifest, judged) == {"bandwidth", "burnin"}
    assert failed_stages(manifest, judged, unfinished=True) == {"bandwidth", "burnin", "fault"}
    assert failed_stages({"stages": "damaged"}, judged) == {"burnin"}
