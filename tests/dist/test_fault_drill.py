"""The fault stage for real on gloo: a rank SIGSTOPs itself, the survivor raises at the timeout, the drill
ends the stopped rank, torchrun restarts the group, training resumes on the reference trajectory —
and no process of the drill outlives the stage, neither after a normal run nor when the runner's
timeout kills the stage in the middle of the drill. Under gloo-cpu's warm launcher, as the rehearsal
runs it: torchrun's own CLI and its workers forked from the zygote (suite/launch/warm_python.py).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from pathlib import Path

import pytest

from suite import runner
from suite.config import GLOO_CPU
from suite.context import StageContext
from suite.launch import forklaunch, procs
from suite.progress import Progress
from suite.results import RunDir
from suite.stages import fault
from suite.stages.fault import FaultConfig

pytestmark = pytest.mark.dist

PG_TIMEOUT_S = 3.0
# Two scenarios at once: the concurrent path the rehearsal takes, with a hang (the stopped rank) among them.
PROFILE = GLOO_CPU.with_overrides(
    fault=FaultConfig(
        ranks=2,
        pg_timeout_s=PG_TIMEOUT_S,
        steps=6,
        checkpoint_every=2,
        fault_step=3,
        scenarios=("hang", "crash"),
        concurrent=True,
    )
)


def own_descendants() -> list[int]:
    """This test process's descendants, without the `ps` that listing them starts."""
    table = procs.descendants(os.getpid())
    out = []
    for pid in table:
        try:
            name = Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:
            continue  # gone already (the ps itself)
        if name != "ps":
            out.append(pid)
    return out


def processes_touching(folder: Path) -> list[str]:
    """Every live process (any parent) whose command line or environment names `folder`: the drill's
    leftovers."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            environ = (proc / "environ").read_bytes().decode(errors="replace")
            state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z" and (str(folder) in cmdline or str(folder) in environ):
            found.append(f"{proc.name} [{state}] {cmdline[:120]}")
    return found


def test_the_leftover_search_sees_a_live_process(tmp_path):
    """The "no process left" assertions below are only worth something if the search can see one."""
    assert processes_touching(tmp_path) == []
    marked = subprocess.Popen(["sleep", "60"], env={**os.environ, "CARDTIME_TEST_FOLDER": str(tmp_path)})
    try:
        found = processes_touching(tmp_path)
        assert [line.split()[0] for line in found] == [str(marked.pid)], found
    finally:
        marked.kill()
        marked.wait()


@pytest.fixture(scope="module")
def drilled(tmp_path_factory):
    """One real hang drill through the stage's run(): rows, raw folder and the process counts around it."""
    base = tmp_path_factory.mktemp("fault")
    raw = base / "raw" / "fault"
    raw.mkdir(parents=True)
    zygote = forklaunch.warm_zygote()
    zygote.ping()  # warm, and among `before`: the drill's torchruns and workers are forked from it
    before = own_descendants()
    ctx = StageContext(
        stage="fault",
        profile=PROFILE,
        run_path=base,
        raw_dir=raw,
        facts={},
        progress=Progress(base, 1, stream=open(os.devnull, "w")),
        deadline=time.monotonic() + 240,
    )
    rows = fault.run(PROFILE, ctx)
    return {
        "rows": rows,
        "raw": raw,
        "before": before,
        "after": own_descendants(),
        "ctx": ctx,
        "base": base,
        "zygote": zygote.pid,
        "zygote_children": procs.descendants(zygote.pid),
    }


def values(rows, case="hang"):
    return {
        r.metric: (r.text if r.unit == "text" else r.value)
        for r in rows
        if r.case == case and r.metric != "loss"
    }


def test_the_survivor_raises_the_gloo_timeout_and_its_first_line_is_kept(drilled):
    v = values(drilled["rows"])
    assert "Timed out waiting 3000ms" in v["error"]
    # Nothing fails before the timeout: the rank is only stopped. The survivor's timer starts when it enters
    # the all-reduce, which may be a little before the faulting rank records its fault.
    assert v["detect_s"] > 0.5 * PG_TIMEOUT_S
    assert v["pg_timeout_s"] == PG_TIMEOUT_S


def test_the_stopped_rank_is_ended_by_the_drill_after_the_survivor_raised(drilled):
    v = values(drilled["rows"])
    assert v["detect_s"] <= v["nudge_s"] <= v["restart_s"] <= v["regroup_s"] <= v["resume_s"] <= v["done_s"]
    stage_events = [
        json.loads(line) for line in (drilled["raw"] / "hang" / "events.stage.jsonl").read_text().splitlines()
    ]
    assert [e["event"] for e in stage_events] == ["forensics", "nudge"]  # the ranks read, then the nudge
    fault_event = next(
        json.loads(line)
        for line in (drilled["raw"] / "hang" / "events.rank1.jsonl").read_text().splitlines()
        if json.loads(line)["event"] == "fault"
    )
    assert stage_events[1]["pid"] == fault_event["pid"] and fault_event["kind"] == "hang"
    assert "30 s" in v["restart_note"]


def test_training_resumes_from_the_last_checkpoint_on_the_reference_trajectory(drilled):
    v = values(drilled["rows"])
    assert (v["last_checkpoint_step"], v["resumed_from_step"], v["steps_lost"], v["steps_done"]) == (
        2,
        2,
        1,
        6,
    )
    assert v["replay_diff"] == 0.0  # step 2 redone from the checkpoint gives the same loss bit for bit
    assert v["loss_diff"] <= PROFILE.section("fault").loss_tolerance
    assert v["pre_fault_diff"] <= PROFILE.section("fault").loss_tolerance
    losses = {
        (r.source, r.repeat): r.value for r in drilled["rows"] if r.metric == "loss" and r.case == "hang"
    }
    assert sorted(s for src, s in losses if src == "attempt1") == [2, 3, 4, 5]
    assert sorted(s for src, s in losses if src == "attempt0") == [0, 1, 2]


def test_the_stage_judges_the_real_drill_a_pass(drilled):
    facts = {"profile": PROFILE.to_dict(), **drilled["ctx"].published}
    verdicts = fault.judge(drilled["rows"], fault.expect(PROFILE, facts), facts)
    assert {v.id: v.status for v in verdicts} == {
        f"fault.{check}.{s}": "pass"
        for s in ("hang", "crash")
        for check in ("detect", "resume", "loss", "forensics")
    }


def test_the_hang_forensics_name_the_stopped_rank_before_it_is_ended(drilled):
    named = {r.metric: r for r in drilled["rows"] if r.case == "hang" and r.metric.startswith("forensics")}
    stopped = PROFILE.section("fault").fault_rank
    assert named["forensics_named"].value == 1.0
    assert named["forensics_named"].text.startswith(f"rank {stopped} on {socket.gethostname()} was stopped")
    assert "all_reduce #" in named["forensics_named"].text
    # read after the survivor raised (the group's timeout) and before the stopped rank was ended
    nudged = values(drilled["rows"], "hang")["nudge_s"]
    assert PROFILE.section("fault").pg_timeout_s <= named["forensics_after_s"].value <= nudged


def test_the_crash_drilled_alongside_resumes_the_same_way(drilled):
    v = values(drilled["rows"], "crash")
    assert (v["resumed_from_step"], v["steps_lost"], v["steps_done"], v["replay_diff"]) == (2, 1, 6, 0.0)
    assert v["loss_diff"] <= PROFILE.section("fault").loss_tolerance
    assert "nudge_s" not in v


def test_checkpoints_are_listed_then_deleted(drilled):
    for scenario in ("hang", "crash"):
        folder = drilled["raw"] / scenario
        assert not (folder / "ckpt").exists()
        assert "step_000004" in (folder / "checkpoints.txt").read_text()
    assert not list(drilled["raw"].glob(".*.result.json"))


def test_torchrun_and_its_workers_ran_forked_from_the_zygote_with_the_users_command_beside(drilled):
    log = (drilled["raw"] / "hang" / "torchrun.log").read_text().splitlines()
    plain = next(line for line in log if line.startswith("# "))
    warm = next(line for line in log if line.startswith("$ "))
    assert (
        "-m torch.distributed.run" in plain
        and "--max-restarts=1" in plain
        and "-m suite.stages.fault.drill_worker" in plain
    )
    # The real torchrun CLI, restarts and all; each worker a --no-python entrypoint standing in for a warm
    # fork.
    assert (
        warm.count("warm_python.py") == 2 and "torch.distributed.run" in warm and "--max-restarts=1" in warm
    )
    assert warm.index("--no-python") < warm.index("suite.stages.fault.drill_worker")
    spawns = [
        json.loads(line) for line in (drilled["raw"] / "hang" / "events.rank0.jsonl").read_text().splitlines()
    ]
    # TORCHELASTIC_RESTART_COUNT from torchrun
    assert [e["attempt"] for e in spawns if e["event"] == "spawn"] == [
        0,
        1,
    ]


def test_no_process_of_the_drill_is_left_behind(drilled):
    assert drilled["zygote"] in drilled["before"]
    assert drilled["after"] == drilled["before"]
    # every torchrun, worker and relay forked for the drill has exited
    assert drilled["zygote_children"] == []
    assert processes_touching(drilled["base"]) == []


class SteppingClock:
    """The runner's clock, jumping an hour ahead once `trigger()` holds: its stage timeout then fires at that
    moment."""

    def __init__(self, trigger):
        self.trigger, self.jumped = trigger, False

    def monotonic(self) -> float:
        if not self.jumped and self.trigger():
            self.jumped = True
        return time.monotonic() + (3600.0 if self.jumped else 0.0)

    def __getattr__(self, name):  # sleep(), time() and the rest: the real clock
        return getattr(time, name)


def test_the_runners_timeout_mid_drill_leaves_no_process_behind(tmp_path, monkeypatch):
    """The stage is killed by the runner's own timeout path while a rank is stopped and the survivor waits in
    the all-reduce (process-group timeout 600 s: it cannot end by itself). The clock jumps once the fault is
    on disk."""
    profile = PROFILE.with_overrides(
        fault=FaultConfig(
            ranks=2,
            pg_timeout_s=600.0,
            steps=6,
            checkpoint_every=2,
            fault_step=3,
            scenarios=("hang", "exception"),
            concurrent=True,
        ),
        stage_timeouts_s=(("fault", 900.0),),
    )
    # the runner starts the run's own (its command line names the run: found below)
    forklaunch.stop_warm_zygote()
    run = runner.start_run(profile, ["fault"], tmp_path)
    events = run.path / "raw" / "fault" / "hang" / "events.rank1.jsonl"
    monkeypatch.setattr(
        runner, "time", SteppingClock(lambda: events.exists() and '"fault"' in events.read_text())
    )
    before = own_descendants()
    outcome = runner.execute(run, profile, stream=open(os.devnull, "w"))
    after = own_descendants()
    verdicts = {v.id: v for v in RunDir.load(run.path).verdicts()}
    assert verdicts["fault.run"].status == "fail" and "timed out" in verdicts["fault.run"].observed
    assert '"fault"' in events.read_text()  # killed in the middle of the drill, with rank 1 stopped
    assert after == before
    assert processes_touching(run.path) == []
    assert outcome.counts["fail"] == 1


def test_concurrent_drills_on_a_multi_node_profiles_fixed_port_each_get_their_own(tmp_path):
    """A multi-node run fixes the profile's master_port (the nodes' rendezvous port, 29400 by default); the
    single-node drills the stage runs at once on the batch host must not all take it: the first would hold it
    and the others fail (6 of 9 checks, in a Slurm job). Here the port is held by this test for the whole
    stage, so a drill that took it could not even start."""
    from suite.launch.torchrun import free_port

    held = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    held.bind(("127.0.0.1", free_port()))
    held.listen()
    profile = PROFILE.with_overrides(
        master_port=held.getsockname()[1],
        fault=FaultConfig(
            ranks=2,
            pg_timeout_s=PG_TIMEOUT_S,
            steps=6,
            checkpoint_every=2,
            fault_step=3,
            scenarios=("crash", "exception"),
            concurrent=True,
        ),
    )
    raw = tmp_path / "raw" / "fault"
    raw.mkdir(parents=True)
    forklaunch.warm_zygote().ping()  # warm before the drills, as the runner's is
    ctx = StageContext(
        stage="fault",
        profile=profile,
        run_path=tmp_path,
        raw_dir=raw,
        facts={},
        progress=Progress(tmp_path, 1, stream=open(os.devnull, "w")),
        deadline=time.monotonic() + 240,
    )
    try:
        rows = fault.run(profile, ctx)
    finally:
        held.close()
    facts = {"profile": profile.to_dict(), **ctx.published}
    verdicts = fault.judge(rows, fault.expect(profile, facts), facts)
    assert {v.id: v.status for v in verdicts} == {
        f"fault.{check}.{s}": "pass"
        for s in ("crash", "exception")
        for check in ("detect", "resume", "loss", "forensics")
    }, verdicts
