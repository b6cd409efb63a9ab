"""python -m suite check: the verdicts printed, and the exit status a provider acceptance pipeline keys on."""

from __future__ import annotations

import json

import pytest

from suite.__main__ import main
from suite.results import RunDir, Verdict
from tests.factories import verdict
from tests.report_synthetic import build_run


def stage_verdict(stage: str, status: str) -> Verdict:
    return verdict(f"{stage}.check", status, reason=f"{status} reason\nsecond line")


GPU_PROFILE = {"name": "nccl-gpu", "device": "cuda", "judge_performance": True}


def make_run(tmp_path, statuses: dict[str, str], finished: bool = True, profile: dict = GPU_PROFILE):
    """A GPU run whose every selected stage completed with one verdict of the given status."""
    run = RunDir.create(
        tmp_path / "run",
        {
            "stages_selected": list(statuses),
            "stages": {},
            "facts": {},
            "profile": profile,
            "finished": "2026-11-29T17:00:00+00:00" if finished else None,
        },
    )
    for stage, status in statuses.items():
        run.replace_stage_verdicts(stage, [stage_verdict(stage, status)])
        run.stage_state(stage).update(status="complete")
    run.save_manifest()
    return run


@pytest.mark.parametrize(
    "statuses, fail_on, code",
    [
        ({"topology": "pass", "bandwidth": "pass"}, "fail", 0),
        ({"topology": "pass", "bandwidth": "skip"}, "fail", 3),  # a planned check skipped: never a pass
        ({"topology": "pass", "bandwidth": "warn"}, "fail", 0),
        ({"topology": "pass", "bandwidth": "warn"}, "warn", 1),
        ({"topology": "fail", "bandwidth": "pass"}, "fail", 1),
        ({"topology": "fail", "bandwidth": "skip"}, "fail", 1),  # a fail rejects whatever else is open
        ({"topology": "fail", "bandwidth": "pass"}, "warn", 1),
        ({"topology": "skip", "bandwidth": "skip"}, "warn", 3),
    ],
)
def test_exit_status_follows_fail_on(tmp_path, capsys, statuses, fail_on, code):
    run = make_run(tmp_path, statuses)
    assert main(["check", "-v", str(run.path), "--fail-on", fail_on]) == code
    out = capsys.readouterr().out
    assert f"box verdict: {({0: 'ACCEPT', 1: 'REJECT', 3: 'INCONCLUSIVE'})[code]}" in out
    for stage, status in statuses.items():
        assert f"{status.upper():<6}  {stage}.check" in out


def test_failures_print_first_with_the_first_line_of_their_reason(tmp_path, capsys):
    run = make_run(tmp_path, {"topology": "pass", "bandwidth": "fail", "crossover": "warn"})
    main(["check", "-v", str(run.path)])
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].startswith("FAIL    bandwidth.check") and lines[1].endswith("fail reason")
    assert lines[2].startswith("WARN") and lines[3].startswith("PASS")
    assert "1 passed, 1 warned, 1 failed, 0 skipped" in lines[-2]
    assert lines[-1] == "box verdict: REJECT: bandwidth.check (--fail-on fail)"


def test_an_interrupted_run_is_never_accepted(tmp_path, capsys):
    run = make_run(tmp_path, {"topology": "pass"})
    run.manifest["stages_selected"].append("bandwidth")
    run.stage_state("bandwidth").update(status="running")
    run.save_manifest()
    assert main(["check", str(run.path), "--fail-on", "fail"]) == 3
    out = capsys.readouterr().out
    assert "NORUN   bandwidth" in out and "--resume" in out
    assert "box verdict: INCONCLUSIVE: 1 planned check(s) not decided: bandwidth" in out


def test_a_skip_is_listed_with_its_reason_and_one_that_does_not_apply_is_not(tmp_path, capsys):
    from suite.verdicts import verdicts_for

    run = make_run(tmp_path, {"topology": "pass", "bandwidth": "skip"})
    run.replace_stage_verdicts(
        "topology",
        [
            verdicts_for("topology").not_applicable(
                "links", expected="GPU pairs", observed="1 GPU", why="one GPU: there is no GPU pair to judge"
            )
        ],
    )
    run.save_manifest()
    assert main(["check", str(run.path)]) == 3
    out = capsys.readouterr().out
    assert "  bandwidth.check: skip reason" in out and "topology.links:" not in out.split("left open")[1]


def test_a_rehearsal_is_rehearsal_whatever_passed(tmp_path, capsys):
    run = make_run(
        tmp_path,
        {"topology": "pass", "bandwidth": "skip"},
        profile={"name": "gloo-cpu", "device": "cpu", "judge_performance": False},
    )
    assert main(["check", str(run.path)]) == 0
    assert "box verdict: REHEARSAL" in capsys.readouterr().out
    run.replace_stage_verdicts("topology", [stage_verdict("topology", "fail")])
    run.save_manifest()
    assert main(["check", str(run.path)]) == 1
    assert "box verdict: REHEARSAL" in capsys.readouterr().out


def test_json_output_for_machines(tmp_path, capsys):
    path = build_run(tmp_path / "run-a")
    assert main(["check", str(path), "--json", "--fail-on", "warn"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["counts"] == {"pass": 2, "warn": 1, "fail": 3, "skip": 1}
    assert data["unfinished"] == ["dp"]
    assert data["rejected"] == [
        "bandwidth.peak.all_gather",
        "bandwidth.peak.all_reduce",
        "fault.run",
        "topology.gpu_name",
    ]
    assert data["box"] == "REJECT" and "dp" in [o["id"] for o in data["open"]]
    assert [v["status"] for v in data["verdicts"]] == ["fail", "fail", "fail", "warn", "pass", "pass", "skip"]


def test_an_unreadable_run_is_a_usage_error(tmp_path, capsys):
    assert main(["check", str(tmp_path / "missing")]) == 2
    assert "not a run directory" in capsys.readouterr().err
    run = make_run(tmp_path, {"topology": "pass"})
    (run.path / "verdicts.json").write_text('{"schema_version": 7, "verdicts": []}')
    assert main(["check", str(run.path)]) == 2
    assert "schema_version 7" in capsys.readouterr().err


def test_check_is_concise_by_default_and_lists_every_verdict_with_v(tmp_path, capsys):
    """By default the failures and warnings, a line saying how many passed or skipped and how to list them,
    what is open and the box verdict; -v every verdict with what was expected."""
    run = make_run(tmp_path, {"topology": "pass", "bandwidth": "fail", "crossover": "warn"})
    main(["check", str(run.path)])
    short = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in short[1:3]] == ["FAIL", "WARN"] and not any(
        l.startswith("PASS") for l in short
    )
    assert "1 verdicts passed or skipped: python -m suite check -v" in short[3]
    main(["check", "-v", str(run.path)])
    assert any(line.startswith("PASS    topology.check") for line in capsys.readouterr().out.splitlines())
