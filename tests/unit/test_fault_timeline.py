"""The fault stage's pure parts on events captured from real gloo drills (tests/data/fault/events-*.jsonl):
timelines, rows, verdicts, expectations, the watcher's log reading and nudge, and the figures."""

from __future__ import annotations

import copy
import dataclasses
import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from suite.config import GLOO_CPU, NCCL_GPU, ProfileError
from suite.context import StageContext
from suite.launch import procs
from suite.progress import Progress
from suite.results import Row, rows_to_frame
from suite.stages import fault
from suite.stages.fault import FaultConfig
from suite.stages.fault.timeline import build_timeline, reference_rows, timeline_rows
from suite.stages.fault.watch import WORKER, DrillWatch, is_drill_process

DATA = Path(__file__).resolve().parent.parent / "data" / "fault"
REFERENCE = [
    5.534308433532715,
    5.539229869842529,
    5.552480697631836,
    5.558701038360596,
    5.555050373077393,
    5.536541938781738,
    5.567831993103027,
    5.5308966636657715,
]
"""The stage's single-process reference of the drill that wrote the captured events
(raw/fault/reference_losses.json)."""
TOL = GLOO_CPU.section("fault").loss_tolerance
PG = GLOO_CPU.section("fault").pg_timeout_s
CAPTURED_PROFILE = GLOO_CPU.with_overrides(fault=dataclasses.replace(GLOO_CPU.section("fault"), steps=8))
"""The profile the captured events were made with: eight steps (the rehearsal now runs six)."""
FACTS = {"profile": CAPTURED_PROFILE.to_dict()}


def captured(scenario: str) -> list[dict]:
    return [json.loads(line) for line in (DATA / f"events-{scenario}-gloo.jsonl").read_text().splitlines()]


def first(events, name, **match):
    return next(e for e in events if e["event"] == name and all(e.get(k) == v for k, v in match.items()))


def rows_of(scenario: str, events: list[dict]):
    return timeline_rows(build_timeline(scenario, 2, events), REFERENCE, PG, TOL)


def values(rows) -> dict:
    return {r.metric: (r.text if r.unit == "text" else r.value) for r in rows if r.metric != "loss"}


def verdicts(rows, scenarios=("crash", "hang", "exception")) -> dict:
    facts = copy.deepcopy(FACTS)
    facts["profile"]["fault"]["scenarios"] = list(scenarios)
    return {v.id: v for v in fault.judge(rows, [], facts)}


# ---------------------------------------------------------------- real drills


def test_hang_timeline_counts_from_the_fault():
    events = captured("hang")
    v = values(rows_of("hang", events))
    t_fault = first(events, "fault")["t"]
    assert v["detect_s"] == pytest.approx(first(events, "error", rank=0)["t"] - t_fault)
    assert v["detect_s"] >= PG  # a stopped rank is only noticed at the process-group timeout
    assert "Timed out waiting 5000ms for recv" in v["error"]
    assert v["nudge_s"] == pytest.approx(first(events, "nudge")["t"] - t_fault)
    assert v["restart_s"] == pytest.approx(
        min(e["t"] for e in events if e["event"] == "spawn" and e["attempt"] == 1) - t_fault
    )
    assert v["regroup_s"] == pytest.approx(
        max(e["t"] for e in events if e["event"] == "group_up" and e["attempt"] == 1) - t_fault
    )
    assert v["detect_s"] < v["nudge_s"] < v["restart_s"] < v["regroup_s"] < v["resume_s"] < v["done_s"]
    assert (v["last_checkpoint_step"], v["resumed_from_step"], v["steps_lost"], v["steps_done"]) == (
        4,
        4,
        1,
        8,
    )
    assert "30 s" in v["restart_note"]


def test_losses_are_compared_with_the_reference_and_with_the_steps_before_the_fault():
    events = captured("hang")
    v = values(rows_of("hang", events))
    resumed = {e["step"]: e["loss"] for e in events if e["event"] == "step" and e["attempt"] == 1}
    before = {e["step"]: e["loss"] for e in events if e["event"] == "step" and e["attempt"] == 0}
    assert v["loss_diff"] == pytest.approx(max(abs(resumed[s] - REFERENCE[s]) for s in resumed))
    assert v["replay_diff"] == 0.0 and resumed[4] == before[4]  # step 4 ran twice, bit for bit the same
    assert v["pre_fault_diff"] == pytest.approx(max(abs(before[s] - REFERENCE[s]) for s in before))
    assert 0 < v["loss_diff"] <= TOL  # DDP and one process sum in another order, no more


def test_exception_detection_waits_for_the_raising_process_to_exit():
    events = captured("exception")
    v = values(rows_of("exception", events))
    assert v["detect_s"] == pytest.approx(first(events, "error")["t"] - first(events, "fault")["t"])
    assert "Connection closed by peer" in v["error"]
    assert "nudge_s" not in v and "restart_note" not in v
    assert v["resumed_from_step"] == 4


def test_a_crash_whose_survivor_torchrun_stopped_first_still_passes_detection():
    events = captured("crash")  # on a loaded machine torchrun's SIGTERM beat the survivor's socket error
    assert not [e for e in events if e["event"] == "error"]
    rows = rows_of("crash", events)
    assert math.isnan(values(rows)["detect_s"])
    v = verdicts(rows, ("crash",))["fault.detect.crash"]
    assert v.status == "pass" and "torchrun restarted the group" in v.observed


def test_every_real_drill_is_judged_a_pass():
    rows = [r for s in ("crash", "hang", "exception") for r in rows_of(s, captured(s))]
    assert {k: v.status for k, v in verdicts(rows).items()} == {
        f"fault.{check}.{s}": "pass"
        for s in ("crash", "hang", "exception")
        for check in ("detect", "resume", "loss")
    } | {f"fault.forensics.{s}": "skip" for s in ("crash", "hang", "exception")}  # captured before it read


# ---------------------------------------------------------------- what wrong looks like


def test_no_error_and_no_restart_is_a_hang():
    events = [e for e in captured("hang") if e["attempt"] == 0 and e["event"] not in ("error", "nudge")]
    v = verdicts(rows_of("hang", events), ("hang",))
    assert v["fault.detect.hang"].status == "fail"
    assert "hangs without an error" in v["fault.detect.hang"].reason
    assert (
        v["fault.resume.hang"].status == "fail"
        and v["fault.resume.hang"].observed == "training did not resume"
    )
    assert v["fault.loss.hang"].status == "fail"


@pytest.mark.parametrize("late_by, status", [(PG + 9.0, "pass"), (PG + 12.0, "warn"), (PG + 31.0, "fail")])
def test_slow_detection_warns_then_fails(late_by, status):
    events = copy.deepcopy(captured("hang"))
    first(events, "error")["t"] = first(events, "fault")["t"] + late_by
    assert verdicts(rows_of("hang", events), ("hang",))["fault.detect.hang"].status == status


def test_resuming_from_an_older_checkpoint_fails():
    events = copy.deepcopy(captured("crash"))
    for e in events:
        if e["event"] == "resumed" and e["attempt"] == 1:
            e["step"] = 2
    v = verdicts(rows_of("crash", events), ("crash",))["fault.resume.crash"]
    assert v.status == "fail" and "earlier step than the last checkpoint (4)" in v.reason


def test_not_finishing_the_steps_fails_the_resume():
    events = [
        e
        for e in captured("crash")
        if not (
            e["attempt"] == 1
            and e["event"] in ("done",)
            or (e["event"] == "step" and e["attempt"] == 1 and e["step"] >= 6)
        )
    ]
    v = verdicts(rows_of("crash", events), ("crash",))["fault.resume.crash"]
    assert v.status == "fail" and "6/8 steps done" in v.observed


@pytest.mark.parametrize(
    "step, what", [(6, "left the uninterrupted trajectory"), (4, "redone after resuming")]
)
def test_a_resumed_loss_off_the_trajectory_fails(step, what):
    events = copy.deepcopy(captured("exception"))
    for e in events:
        if e["event"] == "step" and e["attempt"] == 1 and e["step"] == step:
            e["loss"] += 1e-3
    v = verdicts(rows_of("exception", events), ("exception",))["fault.loss.exception"]
    assert v.status == "fail" and what in v.reason


def test_a_scenario_without_rows_fails():
    assert verdicts([], ("hang",))["fault.drill.hang"].status == "fail"


def test_a_drill_cut_short_says_so():
    rows = timeline_rows(build_timeline("hang", 2, []), REFERENCE, PG, TOL, launch_error="not run: 12 s left")
    v = verdicts(rows, ("hang",))["fault.detect.hang"]
    assert (
        v.status == "fail" and v.observed == "the fault never happened" and "not run: 12 s left" in v.reason
    )


def test_nccl_watchdog_settings_become_rows():
    events = copy.deepcopy(captured("crash"))
    first(events, "settings")["backend"] = "nccl"
    first(events, "settings")["env"] = {
        "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1",
        "TORCH_NCCL_BLOCKING_WAIT": None,
    }
    v = values(rows_of("crash", events))
    assert v["TORCH_NCCL_ASYNC_ERROR_HANDLING"] == "1" and v["TORCH_NCCL_BLOCKING_WAIT"] == "unset"
    # gloo: not recorded
    assert "TORCH_NCCL_ASYNC_ERROR_HANDLING" not in values(rows_of("crash", captured("crash")))


def test_nccl_drills_run_under_torchs_default_and_under_1_as_a_labelled_second_case():
    cases = fault.drill_cases(("crash", "hang"), "nccl")
    assert [(c.name, c.scenario, c.async_error_handling) for c in cases] == [
        ("crash", "crash", None),
        ("hang", "hang", None),
        ("crash.async1", "crash", "1"),
        ("hang.async1", "hang", "1"),
    ]
    default, one = cases[0], cases[2]
    # the default case removes a value the caller's environment holds: torch's own default (3) is measured
    assert "TORCH_NCCL_ASYNC_ERROR_HANDLING" not in default.env(
        {"TORCH_NCCL_ASYNC_ERROR_HANDLING": "1", "A": "b"}
    )
    assert one.env({"A": "b"}) == {"A": "b", "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1"}
    assert "default 3" in default.label and one.label.startswith("TORCH_NCCL_ASYNC_ERROR_HANDLING=1")
    assert [c.name for c in fault.drill_cases(("crash",), "gloo")] == ["crash"]  # gloo ignores the variable


def test_both_watchdog_settings_are_judged_and_labelled():
    rows = []
    for case in fault.drill_cases(("crash",), "nccl"):
        rows += rows_of(case.name, captured("crash"))
        rows.append(
            Row(
                stage="fault",
                case=case.name,
                metric="async_error_handling",
                value=math.nan,
                unit="text",
                world=2,
                text=case.label,
            )
        )
    facts = copy.deepcopy(FACTS)  # the captured drill's settings, judged as an NCCL run's
    facts["profile"]["fault"]["scenarios"] = ["crash"]
    facts["profile"].update(backend="nccl", launcher="torchrun")  # as an NCCL run launches
    got = {v.id: v for v in fault.judge(rows, [], facts)}
    for name in ("crash", "crash.async1"):
        assert got[f"fault.resume.{name}"].status == "pass"
    assert "default 3" in got["fault.detect.crash"].observed
    assert "TORCH_NCCL_ASYNC_ERROR_HANDLING=1" in got["fault.detect.crash.async1"].observed
    facts["profile"].update(
        backend="gloo", launcher="fork"
    )  # one case per scenario there: the .async1 rows are not judged
    assert {v.id for v in fault.judge(rows, [], facts)} == {k for k in got if "async1" not in k}
    assert {e.case for e in fault.expect(NCCL_GPU, {"profile": NCCL_GPU.to_dict()})} == {
        "crash",
        "hang",
        "exception",
        "crash.async1",
        "hang.async1",
        "exception.async1",
    }


# ---------------------------------------------------------------- expectations and profile


def test_expectations_state_detection_resume_step_and_steps_lost():
    got = {(e.case, e.metric): e.value for e in fault.expect(GLOO_CPU, FACTS)}
    assert got[("hang", "detect_s")] == PG and got[("crash", "detect_s")] == 0.0
    # fault at 5, every 2
    assert got[("crash", "resumed_from_step")] == 4 and got[("crash", "steps_lost")] == 1
    gpu = {(e.case, e.metric): e.value for e in fault.expect(NCCL_GPU, {"profile": NCCL_GPU.to_dict()})}
    # fault at 25, every 10
    assert gpu[("crash", "detect_s")] == 60.0 and gpu[("crash", "resumed_from_step")] == 20


def test_drill_ranks_fit_the_profile_and_the_batch():
    assert fault.drill_ranks(GLOO_CPU) == 2
    assert fault.drill_ranks(NCCL_GPU) == 8
    # 8 sequences do not split 3 ways
    assert fault.drill_ranks(NCCL_GPU.with_overrides(nproc=3, degrees=(1,))) == 2


@pytest.mark.parametrize(
    "bad",
    [
        dict(scenarios=("melt",)),
        dict(fault_step=8),
        dict(checkpoint_every=0),
        dict(ranks=1),
        dict(ranks=2, fault_rank=2),
    ],
)
def test_fault_config_refuses_what_cannot_run(bad):
    with pytest.raises(ProfileError):
        FaultConfig(**bad)


def test_a_drill_without_enough_time_left_is_not_started(tmp_path):
    ctx = StageContext(
        stage="fault",
        profile=GLOO_CPU,
        run_path=tmp_path,
        raw_dir=tmp_path,
        facts={},
        progress=Progress(tmp_path, 1, stream=open(os.devnull, "w")),
        deadline=time.monotonic() + 12,
    )
    events, error = fault.drill(GLOO_CPU, ctx, fault.DrillCase("crash", "crash", None), 2)
    assert events == [] and error.startswith("not run:") and "--stage-timeout fault=" in error


# ---------------------------------------------------------------- the watcher


def write_events(folder: Path, name: str, *events: dict) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / name, "a") as f:
        for e in events:
            f.write(json.dumps(e) + "\n")


def test_a_watchdog_line_in_a_survivors_log_is_its_error_with_the_logs_time(tmp_path):
    t_fault = time.mktime((2026, 6, 26, 6, 14, 44, 0, 0, -1))  # 10 min before the captured timeout line
    write_events(
        tmp_path,
        "events.rank2.jsonl",
        {"event": "fault", "t": t_fault, "rank": 2, "attempt": 0, "step": 25, "kind": "crash", "pid": 1},
    )
    (tmp_path / "rank1.log").write_text(
        "rank 1/8 up\n" + (DATA / "nccl-watchdog-timeout-basicsr-737.log").read_text()
    )
    watch = DrillWatch(tmp_path, fault_rank=2, ranks=8)
    watch.poll()
    tl = build_timeline("crash", 8, watch.events())
    assert tl.error_via == "log" and tl.error_rank == 1
    assert tl.error_t - t_fault == pytest.approx(600.903881913, abs=1e-3)
    assert "Watchdog caught collective operation timeout" in tl.error_line


def leave_post_mortem(folder: Path, rank: int) -> None:
    """A survivor's record as suite/forensics/answer.py leaves it on its exception (no collective in it)."""
    (folder / "forensics").mkdir(parents=True, exist_ok=True)
    record = {"rank": rank, "host": "here", "flight_record": {"entries": []}, "stacks": "", "error": "x"}
    (folder / "forensics" / f"rank{rank}.post_mortem.json").write_text(json.dumps(record))


def test_the_watcher_ends_a_stopped_drill_rank_once_a_survivor_raised(tmp_path):
    # A stand-in whose command line names the drill's module, stopped like the hang scenario's rank.
    stopped = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", WORKER])
    try:
        deadline = time.monotonic() + 30
        while not is_drill_process(stopped.pid):  # until exec: before it the child still looks like pytest
            assert time.monotonic() < deadline, "the stand-in never showed the drill's command line"
            time.sleep(0.01)
        os.kill(stopped.pid, signal.SIGSTOP)
        write_events(
            tmp_path,
            "events.rank1.jsonl",
            {
                "event": "fault",
                "t": time.time(),
                "rank": 1,
                "attempt": 0,
                "step": 5,
                "kind": "hang",
                "pid": stopped.pid,
            },
        )
        watch = DrillWatch(tmp_path, fault_rank=1, ranks=2)
        watch.poll()
        assert stopped.poll() is None  # nobody raised yet: leave it
        write_events(
            tmp_path,
            "events.rank0.jsonl",
            {"event": "error", "t": time.time(), "rank": 0, "attempt": 0, "first_line": "RuntimeError: x"},
        )
        leave_post_mortem(tmp_path, rank=0)  # as the survivor does right after its error event
        watch.poll()
        assert stopped.wait(timeout=10) == -signal.SIGKILL
        assert [e["event"] for e in watch.events() if e["event"] == "nudge"] == ["nudge"]
    finally:
        stopped.kill()
        stopped.wait()


def test_a_rank_forked_warm_is_known_by_its_start_time_not_its_command_line(tmp_path):
    """A rank forked from the zygote runs under the zygote's command line: the fault event's start time names
    it, and the same pid with another start time (recycled) is left alone."""
    stopped = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        deadline = time.monotonic() + 30
        while "sleep" not in Path(f"/proc/{stopped.pid}/cmdline").read_text():  # exec'd: its own start time
            assert time.monotonic() < deadline
            time.sleep(0.01)
        started = procs.start_ticks(stopped.pid)
        assert started is not None and not is_drill_process(stopped.pid)  # its command line does not say
        assert is_drill_process(stopped.pid, started) and not is_drill_process(stopped.pid, started - 1)
        os.kill(stopped.pid, signal.SIGSTOP)
        fault = {
            "event": "fault",
            "t": time.time(),
            "rank": 1,
            "attempt": 0,
            "step": 5,
            "kind": "hang",
            "pid": stopped.pid,
        }
        write_events(tmp_path / "recycled", "events.rank1.jsonl", {**fault, "started": started + 1})
        write_events(tmp_path / "warm", "events.rank1.jsonl", {**fault, "started": started})
        for folder in ("recycled", "warm"):
            leave_post_mortem(tmp_path / folder, rank=0)
            write_events(
                tmp_path / folder,
                "events.rank0.jsonl",
                {
                    "event": "error",
                    "t": time.time(),
                    "rank": 0,
                    "attempt": 0,
                    "first_line": "RuntimeError: x",
                },
            )
        DrillWatch(tmp_path / "recycled", fault_rank=1, ranks=2).poll()
        time.sleep(0.2)
        assert stopped.poll() is None
        DrillWatch(tmp_path / "warm", fault_rank=1, ranks=2).poll()
        assert stopped.wait(timeout=10) == -signal.SIGKILL
    finally:
        stopped.kill()
        stopped.wait()


def test_the_watcher_never_signals_a_process_that_is_not_the_drill(tmp_path):
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        write_events(
            tmp_path,
            "events.rank1.jsonl",
            {
                "event": "fault",
                "t": time.time(),
                "rank": 1,
                "attempt": 0,
                "step": 5,
                "kind": "hang",
                "pid": other.pid,
            },
        )
        write_events(
            tmp_path,
            "events.rank0.jsonl",
            {"event": "error", "t": time.time(), "rank": 0, "attempt": 0, "first_line": "RuntimeError: x"},
        )
        DrillWatch(tmp_path, fault_rank=1, ranks=2).poll()
        time.sleep(0.2)
        assert other.poll() is None
    finally:
        other.kill()
        other.wait()


# ---------------------------------------------------------------- figures


def test_figures_draw_each_timeline_with_its_numbers_and_the_losses():
    from suite.stages.fault import figure as figures

    rows = [r for s in ("crash", "hang", "exception") for r in rows_of(s, captured(s))]
    rows += reference_rows(REFERENCE)
    frame = rows_to_frame(rows)
    facts = {"fault_drill": {"ranks": 2, "backend": "gloo", "pg_timeout_s": PG}}
    made = figures.figures(frame, pd.DataFrame(), facts)
    assert len(made) == 2
    texts = [t.get_text() for t in made[0].axes[0].texts]
    hang = values(rows_of("hang", captured("hang")))
    assert any(
        f"detected {hang['detect_s']:.2f} s" in t and f"resumed {hang['resume_s']:.2f} s" in t for t in texts
    )
    assert any("detected: not reached" in t for t in texts)  # the crash whose survivor torchrun stopped first
    assert made[1].axes[1].get_yscale() == "log"
