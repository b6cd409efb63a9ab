"""Stage isolation with the warm launcher: stages defined here launch real gloo ranks through ctx.torchrun,
forked from the run's one zygote. A crashing rank, a hung rank (the stage's timeout) and a stage that kills
the zygote each fail only their own stage; the run goes on, the zygote serves the next stage (or, killed, is
started again), and no rank outlives its stage."""

from __future__ import annotations

import io
import os
import signal
import time
import types

import pytest

from suite import runner, stages
from suite.config import GLOO_CPU
from suite.launch import forklaunch, procs
from suite.results import Row, Verdict
from suite.stage_contract import Stage

pytestmark = pytest.mark.dist

WORKER = "tests.dist.workers.report_env"


def make_stage(
    name: str,
    worker_args: list[str],
    kill_zygote: bool = False,
    launch_timeout_s: float | None = None,
    check_gone: str = "",
) -> types.ModuleType:
    module = types.ModuleType(f"warm_{name}")

    def run(profile, ctx):
        zygote = forklaunch.warm_zygote()
        (ctx.raw_dir / "zygote.pid").write_text(str(zygote.pid))
        if kill_zygote:
            os.kill(zygote.pid, signal.SIGKILL)
            return []
        if check_gone:  # while the zygote lives on: the ranks of that earlier stage must be gone already
            pids = [
                int(r["value"])
                for r in _rows(ctx.run_path / "raw" / check_gone / "w.out")
                if r["metric"] == "pid"
            ]
            deadline = time.monotonic() + 10
            while any(procs.alive(p) for p in pids) and time.monotonic() < deadline:
                time.sleep(0.1)
            (ctx.raw_dir / "still-alive.txt").write_text(f"{len(pids)} {[p for p in pids if procs.alive(p)]}")
        kwargs = {} if launch_timeout_s is None else {"timeout_s": launch_timeout_s}
        result = ctx.torchrun(WORKER, worker_args, nproc=2, tag="w", **kwargs)
        return [
            Row(stage=name, case=r.case, metric=r.metric, value=r.value, unit=r.unit, rank=r.rank)
            for r in result.rows()
            if r.case == "sum_of_ranks"
        ]

    def judge(rows, expectations, facts):
        ok = len(rows) == 2 and all(r.value == 1.0 for r in rows)
        return [
            Verdict(
                id=f"{name}.sum",
                stage=name,
                status="pass" if ok else "fail",
                expected="1 on both ranks",
                observed=str([r.value for r in rows]),
                reason="0 + 1",
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
        expect=lambda profile, facts: [],
        run=run,
        judge=judge,
    )
    return module


@pytest.fixture
def warm_stages(monkeypatch):
    registry = {
        "before": make_stage("before", []),
        "crash": make_stage("crash", ["--fail-rank", "1"]),
        "segv": make_stage("segv", ["--kill-rank", "0"]),
        # The launch would wait 600 s: the runner's stage timeout kills the stage, and its ranks must die with
        # it.
        "hang": make_stage("hang", ["--hang-rank", "1"], launch_timeout_s=600),
        "middle": make_stage("middle", [], check_gone="hang"),
        "killer": make_stage("killer", [], kill_zygote=True),
        "after": make_stage("after", []),
    }
    monkeypatch.setattr(stages, "load", lambda name: registry[name])
    monkeypatch.setattr(runner, "launches_ranks", lambda name: True)  # these stages launch ranks
    return list(registry)


def test_a_failing_warm_rank_fails_only_its_stage(tmp_path, warm_stages):
    profile = GLOO_CPU.with_overrides(stage_timeouts_s=(("hang", 10.0),))
    assert profile.launcher == "fork"
    run = runner.start_run(profile, warm_stages, tmp_path)
    start = time.monotonic()
    outcome = runner.execute(run, profile, stream=io.StringIO())
    verdicts = {v.id: v for v in run.verdicts()}
    assert len(verdicts) == len(warm_stages)
    assert {name: verdicts[f"{name}.sum"].status for name in ("before", "middle", "after")} == dict.fromkeys(
        ("before", "middle", "after"), "pass"
    )
    assert (
        verdicts["crash.run"].status == "fail" and "rank 1 failing on purpose" in verdicts["crash.run"].reason
    )
    assert verdicts["segv.run"].status == "fail" and "exited with code -9" in verdicts["segv.run"].reason
    assert verdicts["hang.run"].status == "fail" and "timed out after 10 s" in verdicts["hang.run"].observed
    assert verdicts["killer.sum"].status == "fail"  # it returned no rows; the run went on
    assert outcome.counts["fail"] == 4
    zygotes = {name: int((run.path / "raw" / name / "zygote.pid").read_text()) for name in warm_stages}
    # One warm process served every stage up to the one that killed it; the next stage got a new one.
    assert len({zygotes[n] for n in warm_stages[:-1]}) == 1 and zygotes["after"] != zygotes["killer"]
    assert not procs.alive(zygotes["after"]), "the run's zygote outlived the run"
    # The hung stage's ranks died with it (their agent kills them once the stage's connection closes), seen by
    # the next stage while the same zygote still runs.
    assert (run.path / "raw" / "middle" / "still-alive.txt").read_text() == "2 []"
    assert "zygote" in (run.path / runner.ZYGOTE_LOG).read_text()
    assert time.monotonic() - start < 120


def _rows(folder):
    import json

    return [
        json.loads(line)
        for path in sorted(folder.glob("rows.rank*.jsonl"))
        for line in path.read_text().splitlines()
        if line.strip()
    ]
