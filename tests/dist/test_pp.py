"""The pp stage's worker on two real gloo ranks, one launch serving every assertion: each schedule's golden
comparison passes, each deliberate mistake exceeds its tolerance by ≥ 10×, the sleep-stage bubble follows
the formula, and the GPT's timed rows are there.

Mistakes (suite/stages/pp/worker.py, run under 1F1B): dropped_layer (a stage boundary off by one),
unscaled_grads (scale_grads=False), reordered_microbatches (targets in another micro-batch order); and the
drill's extra_barrier (hand_1f1b with a barrier after each backward's exchange).

The launch runs beside four busy loops (tests/loadgen.py): the bubble verdicts, replayed from the slots, pass
on the correct schedules and fail the extra barrier however busy the machine is.
"""

from __future__ import annotations

import dataclasses

import pytest

from suite.config import GLOO_CPU
from suite.launch.torchrun import run_torchrun
from suite.stages import pp as pp_stage
from suite.stages.pp.worker import DRILL_MISTAKE_SCHEDULE, DRILL_MISTAKES, MISTAKE_SCHEDULE, MISTAKES
from tests.loadgen import busy_loops

pytestmark = [pytest.mark.dist, pytest.mark.timeout(600)]

PP = GLOO_CPU.section("pp")
TOLS = pp_stage.case_tolerances(pp_stage.pp_model(GLOO_CPU), PP.golden_steps)


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    raw = tmp_path_factory.mktemp("pp")
    with busy_loops(4, max_s=300):
        return run_torchrun(
            GLOO_CPU,
            "suite.stages.pp.worker",
            pp_stage.worker_args(GLOO_CPU, (*MISTAKES, *DRILL_MISTAKES)),
            raw_dir=raw,
            tag="t",
            nproc=pp_stage.launch_ranks(GLOO_CPU),
            timeout_s=300,
        ).rows()


def errors(rows, schedule, prefix=""):
    return {
        r.case[len(prefix) :]: r.value
        for r in rows
        if r.metric == "max_abs_error"
        and r.algo == schedule
        and r.case.startswith(prefix)
        and (prefix or not r.case.startswith("mistake."))
    }


@pytest.mark.parametrize("schedule", PP.schedules)
def test_every_schedule_equals_one_process(rows, schedule):
    found = errors(rows, schedule)
    assert set(found) == set(pp_stage.GOLDEN_CASES)
    assert all(v <= TOLS[c].bound for c, v in found.items()), found


@pytest.mark.parametrize("mistake", MISTAKES)
def test_each_mistake_exceeds_the_tolerance_tenfold(rows, mistake):
    found = errors(rows, MISTAKE_SCHEDULE, prefix=f"mistake.{mistake}.")
    assert set(found) == {"loss", "grads"}, found
    assert max(v / TOLS[c].bound for c, v in found.items()) >= 10, found


def test_a_dropped_layer_shows_in_the_loss_itself(rows):
    found = errors(rows, MISTAKE_SCHEDULE, prefix="mistake.dropped_layer.")
    assert found["loss"] >= 10 * TOLS["loss"].bound  # the forward is another function
    assert found["grads"] >= 10 * TOLS["grads"].bound  # and a block no stage holds has no gradient


def test_verdicts_pass_on_the_real_rows_and_fail_on_a_mistake(rows):
    facts = {"profile": GLOO_CPU.to_dict()}
    want = pp_stage.expect(GLOO_CPU, facts)
    for metric in ("bubble", "wall_bubble"):  # every M, both ranks: the replayed share and the wall-clock one
        measured = [r for r in rows if r.case == "sleep_stages" and r.metric == metric and "." not in r.algo]
        assert len(measured) == 2 * len([e for e in want if e.case == "sleep_stages"]), metric
    got = {v.id: v for v in pp_stage.judge(rows, want, facts)}
    assert all(got[f"pp.golden.{s}.pp2"].status == "pass" for s in PP.schedules)
    assert all(got[f"pp.bubble.{s}"].status == "pass" for s in PP.bubble_schedules), [
        got[f"pp.bubble.{s}"].observed for s in PP.bubble_schedules
    ]
    for mistake in MISTAKES:  # the mistake's numbers in place of the real ones: the same judge fails them
        swapped = [
            dataclasses.replace(r, case=r.case.rsplit(".", 1)[1])
            if r.case.startswith(f"mistake.{mistake}.")
            else r
            for r in rows
            if not (r.algo == MISTAKE_SCHEDULE and r.case in ("loss", "grads"))
        ]
        assert {v.id: v.status for v in pp_stage.judge(swapped, want, facts)}["pp.golden.1f1b.pp2"] == "fail"


def test_the_gpt_timed_rows(rows):
    bubble = {(r.algo, r.rank): r.value for r in rows if r.case == "gpt" and r.metric == "bubble"}
    assert set(bubble) == {(s, rank) for s in PP.timed_schedules for rank in (0, 1)}
    assert all(0 < v < 1 for v in bubble.values())
    steps = {r.algo: r.value for r in rows if r.case == "gpt" and r.metric == "step_time_s"}
    assert set(steps) == set(PP.timed_schedules) and all(v > 0 for v in steps.values())


@pytest.mark.parametrize("mistake", DRILL_MISTAKES)
def test_the_bubble_verdict_fails_an_extra_barrier_under_load(rows, mistake):
    """The mistaken schedule's rows in place of hand_1f1b's: the same judge fails them (the launch ran beside
    four busy loops, and the correct schedules passed in the test above)."""
    facts = {"profile": GLOO_CPU.to_dict()}
    want = pp_stage.expect(GLOO_CPU, facts)
    mistaken = f"{DRILL_MISTAKE_SCHEDULE}.{mistake}"
    swapped = [
        dataclasses.replace(r, algo=DRILL_MISTAKE_SCHEDULE) if r.algo == mistaken else r
        for r in rows
        if r.algo != DRILL_MISTAKE_SCHEDULE
    ]
    got = {v.id: v for v in pp_stage.judge(swapped, want, facts)}[f"pp.bubble.{DRILL_MISTAKE_SCHEDULE}"]
    assert got.status == "fail", got.observed
    replayed = {r.count: r.value for r in rows if r.algo == mistaken and r.metric == "bubble"}
    formula = {
        e.count: e.value for e in want if e.case == "sleep_stages" and e.algo == DRILL_MISTAKE_SCHEDULE
    }
    assert all(replayed[m] > formula[m] + 0.05 for m in formula), (replayed, formula)  # whole slots more
