"""python -m suite check: the verdicts printed, and the exit status a provider acceptance pipeline keys on."""

from __future__ import annotations

import json

import pytest

from suite.__main__ import main
from suite.results import RunDir, Verdict
from tests.report_synthetic import build_run


def verdict(stage: str, status: str) -> Verdict:
    return Verdict(id=f"{stage}.check", stage=stage, status=status, expected="e", observed="o",
                   reason=f"{status} reason\nsecond line")


def make_run(tmp_path, statuses: dict[str, str], finished: bool = True):
    """A run whose every selected stage completed with one verdict of the given status."""
    run = RunDir.create(tmp_path / "run", {"stages_selected": list(statuses), "stages": {}, "facts": {},
                                           "finished": "2026-11-29T17:00:00+00:00" if finished else None})
    for stage, status in statuses.items():
        run.replace_stage_verdicts(stage, [verdict(stage, status)])
        run.stage_state(stage).update(status="complete")
    run.save_manifest()
    return run


@pytest.mark.parametrize("statuses, fail_on, code", [
    ({"topology": "pass", "bandwidth": "skip"}, "fail", 0),
    ({"topology": "pass", "bandwidth": "warn"}, "fail", 0),
    ({"topology": "pass", "bandwidth": "warn"}, "warn", 1),
    ({"topology": "fail", "bandwidth": "pass"}, "fail", 1),
    ({"topology": "fail", "bandwidth": "pass"}, "warn", 1),
    ({"topology": "skip", "bandwidth": "skip"}, "warn", 0),
])
def test_exit_status_follows_fail_on(tmp_path, capsys, statuses, fail_on, code):
    run = make_run(tmp_path, statuses)
    assert main(["check", str(run.path), "--fail-on", fail_on]) == code
    out = capsys.readouterr().out
    assert ("REJECTED" if code else "ACCEPTED") in out
    for stage, status in statuses.items():
        assert f"{status.upper():<6}  {stage}.check" in out


def test_failures_print_first_with_the_first_line_of_their_reason(tmp_path, capsys):
    run = make_run(tmp_path, {"topology": "pass", "bandwidth": "fail", "crossover": "warn"})
    main(["check", str(run.path)])
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].startswith("FAIL    bandwidth.check") and lines[1].endswith("fail reason")
    assert lines[2].startswith("WARN") and lines[3].startswith("PASS")
    assert "1 passed, 1 warned, 1 failed, 0 skipped" in lines[-2]


def test_an_interrupted_run_is_never_accepted(tmp_path, capsys):
    run = make_run(tmp_path, {"topology": "pass"})
    run.manifest["stages_selected"].append("bandwidth")
    run.stage_state("bandwidth").update(status="running")
    run.save_manifest()
    assert main(["check", str(run.path), "--fail-on", "fail"]) == 1
    out = capsys.readouterr().out
    assert "NORUN   bandwidth" in out and "--resume" in out and "bandwidth (did not run)" in out


def test_json_output_for_machines(tmp_path, capsys):
    path = build_run(tmp_path / "run-a")
    assert main(["check", str(path), "--json", "--fail-on", "warn"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["counts"] == {"pass": 2, "warn": 1, "fail": 3, "skip": 1}
    assert data["unfinished"] == ["dp"]
    assert data["rejected"] == ["bandwidth.peak.all_gather", "bandwidth.peak.all_reduce", "fault.run",
                                "topology.gpu_name", "dp (did not run)"]
    assert [v["status"] for v in data["verdicts"]] == ["fail", "fail", "fail", "warn", "pass", "pass", "skip"]


def test_an_unreadable_run_is_a_usage_error(tmp_path, capsys):
    assert main(["check", str(tmp_path / "missing")]) == 2
    assert "not a run directory" in capsys.readouterr().err
    run = make_run(tmp_path, {"topology": "pass"})
    (run.path / "verdicts.json").write_text('{"schema_version": 7, "verdicts": []}')
    assert main(["check", str(run.path)]) == 2
    assert "schema_version 7" in capsys.readouterr().err
