"""The runner with small stages defined here: failures become verdicts, the run goes on, resume keeps work."""

from __future__ import annotations

import dataclasses
import io
import json
import os
import subprocess
import sys
import time
import types
from pathlib import Path

import pytest

from suite import runner, stages
from suite.config import GLOO_CPU
from suite.launch import procs
from suite.results import Expectation, Row, RunDir, SchemaError, Verdict
from suite.stage_contract import Stage


def make_stage(name: str, behaviour: str = "ok", calls: Path | None = None) -> types.ModuleType:
    module = types.ModuleType(f"fake_{name}")

    def expect(profile, facts):
        return [Expectation(stage=name, case="c", metric="m", value=2.0, unit="count", basis="1 + 1")]

    def run(profile, ctx):
        if calls is not None:  # run() executes in a forked child: record calls in a file
            with open(calls, "a") as f:
                f.write(name + "\n")
        ctx.say("working", done=1, of=2)
        if behaviour == "crash":
            raise ValueError(f"{name} exploded")
        if behaviour == "hang":
            # A grandchild too: the timeout must take the whole tree down.
            child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
            (ctx.raw_dir / "grandchild.pid").write_text(str(child.pid))
            time.sleep(600)
        if behaviour == "segv":
            import signal

            os.kill(os.getpid(), signal.SIGSEGV)
        ctx.publish(f"{name}_fact", {"seen": facts_seen(ctx)})
        (ctx.raw_dir / "tool-output.txt").write_text("untouched\n")
        return [Row(stage=name, case="c", metric="m", value=2.0, unit="count", rank=r) for r in range(3)]

    def judge(rows, expectations, facts):
        if behaviour == "judge-crash":
            raise KeyError("missing")
        ok = len(rows) == 3 and all(r.value == expectations[0].value for r in rows)
        return [
            Verdict(
                id=f"{name}.value",
                stage=name,
                status="pass" if ok else "fail",
                expected="2",
                observed=str([r.value for r in rows]),
                reason="all ranks agree",
            )
        ]

    module.STAGE = Stage(
        row=99,
        title=name,
        measures=f"{name} things",
        wrong="anything",
        rehearsal="yes",
        config=None,
        estimate=lambda p: (0.0, ""),
        expect=expect,
        run=run,
        judge=judge,
    )
    return module


def facts_seen(ctx) -> list[str]:
    return sorted(k for k in ctx.facts if k != "profile")


@pytest.fixture
def fake_stages(monkeypatch):
    registry: dict[str, types.ModuleType] = {}

    def load(name: str) -> types.ModuleType:
        if name not in registry:
            raise stages.StageSelectionError(f"no stage {name!r}")
        return registry[name]

    monkeypatch.setattr(stages, "load", load)
    return registry


def start(tmp_path, names, profile=GLOO_CPU):
    return runner.start_run(profile, names, tmp_path)


def execute(run, profile=GLOO_CPU):
    return runner.execute(run, profile, stream=io.StringIO())


def test_failures_become_verdicts_and_the_run_goes_on(tmp_path, fake_stages):
    fake_stages.update(
        a=make_stage("a"),
        b=make_stage("b", "crash"),
        c=make_stage("c", "segv"),
        d=make_stage("d", "judge-crash"),
        e=make_stage("e"),
    )
    run = start(tmp_path, list("abcde"))
    outcome = execute(run)
    verdicts = {v.id: v for v in RunDir.load(run.path).verdicts()}
    assert verdicts["a.value"].status == "pass"
    assert verdicts["b.run"].status == "fail" and "b exploded" in verdicts["b.run"].reason
    assert verdicts["c.run"].status == "fail" and "SIGSEGV" in verdicts["c.run"].reason
    assert verdicts["d.run"].status == "fail" and "judge() raised" in verdicts["d.run"].reason
    assert verdicts["e.value"].status == "pass"
    assert outcome.exit_code == 1
    manifest = json.loads((run.path / "manifest.json").read_text())
    assert {k: v["status"] for k, v in manifest["stages"].items()} == {
        "a": "complete",
        "b": "error",
        "c": "error",
        "d": "complete",
        "e": "complete",
    }
    # Facts flow forward: e saw a's fact but not b's (b crashed before publishing).
    assert manifest["facts"]["e_fact"]["seen"] == ["a_fact", "d_fact"]
    assert (run.path / "raw" / "a" / "tool-output.txt").read_text() == "untouched\n"


def test_judge_gets_the_runs_own_profile_typed_and_every_fact_published_so_far(tmp_path, fake_stages):
    """Not the profile rebuilt from JSON: the very object the run was started with, beside the facts the
    stages before published and this stage's own."""
    seen = {}
    fake_stages.update(a=make_stage("a"), b=make_stage("b"))

    def judge(rows, expectations, facts):
        seen.update(profile=facts.profile, keys=sorted(facts), a=facts["a_fact"])
        return []

    fake_stages["b"].STAGE = dataclasses.replace(fake_stages["b"].STAGE, judge=judge)
    profile = GLOO_CPU.with_overrides(omp_threads=1)  # rebuilt from JSON it would be equal, never the same
    execute(start(tmp_path, ["a", "b"], profile), profile)
    assert seen["profile"] is profile and seen["keys"] == ["a_fact", "b_fact"]
    assert seen["a"] == {"seen": []}  # a's own record, by its key


def test_a_hanging_stage_is_killed_with_its_whole_tree(tmp_path, fake_stages):
    fake_stages.update(h=make_stage("h", "hang"), after=make_stage("after"))
    profile = GLOO_CPU.with_overrides(stage_timeout_s=3.0)
    run = start(tmp_path, ["h", "after"], profile)
    outcome = execute(run, profile)
    verdicts = {v.id: v for v in run.verdicts()}
    assert verdicts["h.run"].status == "fail"
    assert "timed out after 3 s" in verdicts["h.run"].observed
    assert verdicts["after.value"].status == "pass"
    grandchild = int((run.path / "raw" / "h" / "grandchild.pid").read_text())
    deadline = time.monotonic() + 5
    while procs.alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not procs.alive(grandchild), "the hung stage's grandchild survived the timeout"
    assert outcome.counts["fail"] == 1


def test_resume_keeps_complete_stages_and_reruns_the_rest(tmp_path, fake_stages):
    calls = tmp_path / "calls.txt"
    fake_stages.update(a=make_stage("a", calls=calls), b=make_stage("b", "crash", calls=calls))
    run = start(tmp_path / "runs", ["a", "b"])
    execute(run)
    first_rows = RunDir.load(run.path).rows()
    # The user fixes b and resumes.
    fake_stages["b"] = make_stage("b", calls=calls)
    resumed, profile = runner.resume_run(run.path)
    outcome = execute(resumed, profile)
    assert calls.read_text().split() == ["a", "b", "b"]
    final = RunDir.load(run.path)
    assert [r for r in final.rows() if r.stage == "a"] == [r for r in first_rows if r.stage == "a"]
    assert len([r for r in final.rows() if r.stage == "b"]) == 3
    assert len(final.expectations()) == 2  # one per stage: replaced, never duplicated
    assert sorted(v.id for v in final.verdicts()) == ["a.value", "b.value"]
    assert final.manifest["stages"]["a"]["attempt"] == 1
    assert final.manifest["stages"]["b"]["attempt"] == 2
    assert outcome.exit_code == 0


def test_a_stage_killed_mid_write_leaves_no_half_records(tmp_path, fake_stages):
    # A stage marked running (the runner died in it) reruns and replaces its own rows only.
    fake_stages.update(a=make_stage("a"), b=make_stage("b"))
    run = start(tmp_path, ["a", "b"])
    execute(run)
    run = RunDir.load(run.path)
    run.manifest["stages"]["b"]["status"] = "running"
    run.save_manifest()
    resumed, profile = runner.resume_run(run.path)
    execute(resumed, profile)
    rows = RunDir.load(run.path).rows()
    assert len(rows) == 6


def test_unknown_schema_is_refused_with_advice(tmp_path, fake_stages):
    fake_stages.update(a=make_stage("a"))
    run = start(tmp_path, ["a"])
    manifest = json.loads((run.path / "manifest.json").read_text())
    manifest["schema_version"] = 99
    (run.path / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(SchemaError, match="schema_version 99.*--out NEW_DIR"):
        RunDir.load(run.path)


def test_run_ids_are_unique_and_name_time_host_profile(tmp_path, fake_stages):
    fake_stages.update(a=make_stage("a"))
    first, second = start(tmp_path, ["a"]), start(tmp_path, ["a"])
    assert first.path != second.path
    assert first.path.name.endswith("-gloo-cpu") and first.path.name[8] == "T"
    assert second.path.name == first.path.name + "-2"


def test_inject_hook_names_are_checked_per_stage(monkeypatch):
    monkeypatch.setenv(runner.INJECT_ENV, "bandwidth=crash")
    runner.inject("topology")  # not this stage: nothing happens
    with pytest.raises(RuntimeError, match="injected crash in stage bandwidth"):
        runner.inject("bandwidth")
