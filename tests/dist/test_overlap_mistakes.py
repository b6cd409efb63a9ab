"""The overlap stage's gradient check catches each deliberate mistake (suite/stages/overlap/worker.py
MISTAKES: no_sync, no_average, stale_grads) by ≥ 10× its tolerance, while every real mode passes, and the
same launch's watched buckets are DDP's own and fire after their gradients.

One 4-rank launch runs the stage's own modes and every mistake; the stage's judge reads its rows.
"""

from __future__ import annotations

import dataclasses

import pytest

from suite.config import GLOO_CPU
from suite.costmodel.tolerance import tolerance
from suite.launch import forklaunch  # launch(): the profile's launcher, gloo-cpu's warm fork launcher
from suite.stages import overlap
from suite.stages.overlap.worker import MISTAKES
from suite.workloads.worker_cli import model_args

pytestmark = pytest.mark.dist

TOL = tolerance("float32")
FACTS = {"profile": GLOO_CPU.to_dict()}


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    raw = tmp_path_factory.mktemp("overlap-mistakes")
    args = [
        *model_args(GLOO_CPU.model),
        "--modes",
        ",".join(overlap.modes(GLOO_CPU.model)),
        "--mistakes",
        ",".join(MISTAKES),
    ]
    return forklaunch.launch(
        GLOO_CPU, "suite.stages.overlap.worker", args, raw_dir=raw, tag="ddp", nproc=4, timeout_s=600
    ).rows()


def mistake_diff(rows, mistake):
    found = [r for r in rows if r.case == f"mistake.{mistake}" and r.metric == "max_grad_diff"]
    assert len(found) == 1, f"{len(found)} rows for {mistake}"
    return found[0]


@pytest.mark.parametrize("mistake", MISTAKES)
def test_the_gradient_check_catches_the_mistake(rows, mistake):
    row = mistake_diff(rows, mistake)
    assert row.overlap != overlap.NO_OVERLAP  # made in an overlapped mode, DDP's reducer in charge
    assert row.value > 10 * TOL, (mistake, row.value)


def test_the_real_modes_pass_beside_the_mistakes(rows):
    grads = {v.id: v.status for v in overlap.judge(rows, [], FACTS) if v.id.startswith("overlap.grads.")}
    assert len(grads) == len(overlap.modes(GLOO_CPU.model)) == 4
    assert set(grads.values()) == {"pass"}, grads


@pytest.mark.parametrize("mistake", MISTAKES)
def test_the_stage_verdict_fails_on_the_mistake(rows, mistake):
    bad = mistake_diff(rows, mistake)
    label = bad.overlap
    # the mode's own check row replaced by the mistake's numbers, as if the mode had made it
    swapped = [
        r for r in rows if not (r.overlap == label and r.metric == "max_grad_diff" and r.case == "ddp")
    ]
    swapped.insert(0, dataclasses.replace(bad, case="ddp"))
    verdicts = {v.id: v for v in overlap.judge(swapped, [], FACTS)}
    assert verdicts[f"overlap.grads.{label}"].status == "fail", verdicts[f"overlap.grads.{label}"]


def test_the_watched_buckets_are_ddps_and_fire_after_their_gradients(rows):
    verdicts = {v.id: v for v in overlap.judge(rows, [], FACTS)}
    overlapped = [
        overlap.mode_of(m).label for m in overlap.modes(GLOO_CPU.model) if overlap.mode_of(m).overlap
    ]
    assert len(overlapped) == 3
    for label in overlapped:
        for check in ("membership", "launch"):
            assert verdicts[f"overlap.{check}.{label}"].status == "pass", verdicts[f"overlap.{check}.{label}"]
        # the hook's buckets are the ones DDP's logging data reports for the checked model (same dtype here)
        logged = next(r.text for r in rows if r.overlap == label and r.metric == "buckets")
        watched = [r for r in rows if r.overlap == label and r.metric == "bucket_bytes"]
        assert [int(r.value) for r in sorted(watched, key=lambda r: int(r.case.rsplit(".", 1)[1]))] == [
            int(x) for x in logged.split()
        ]
        assert sum(len(r.text.split()) for r in watched) == 24  # every parameter in exactly one bucket
