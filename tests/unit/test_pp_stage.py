"""The pp stage's pure parts: the bubble formula, the model's cut into stages and their placement per
schedule, the verdicts on given rows (pass, a bubble off the formula, a missing case), the plan and the
figures."""

from __future__ import annotations

import dataclasses
import math

import pandas as pd
import pytest
from matplotlib.figure import Figure

from suite.config import GLOO_CPU, NCCL_GPU, ProfileError, get_profile
from suite.costmodel.bubble import bubble_fraction, runs_at
from suite.results import Row
from suite.stages import pp
from suite.stages.pp import figure as pp_figures
from suite.stages.pp.split import stage_indices, stage_units


def test_the_formula_at_p2_and_interleaved():
    assert [round(bubble_fraction(2, m), 3) for m in (1, 2, 4, 8)] == [0.5, 0.333, 0.2, 0.111]
    assert bubble_fraction(4, 4, chunks=2) == pytest.approx(3 / 11)
    assert bubble_fraction(8, 16) == pytest.approx(7 / 23)
    assert not runs_at("1f1b", 2, 1) and runs_at("gpipe", 2, 1) and runs_at("interleaved_1f1b", 4, 4)
    assert not runs_at("interleaved_1f1b", 4, 9) and runs_at("interleaved_1f1b", 4, 10)  # M % (M // P) rounds
    assert not runs_at("dualpipev", 4, 7) and runs_at("dualpipev", 4, 8)
    with pytest.raises(ValueError):
        bubble_fraction(2, 0)


def test_stage_units_cover_every_unit_once_and_the_mistake_drops_a_block():
    for layers, stages in ((2, 2), (2, 4), (8, 8), (16, 16), (3, 2)):
        units = stage_units(layers, stages)
        assert len(units) == stages and all(units)
        assert [u for s in units for u in s] == ["embed", *range(layers), "head"]
    dropped = stage_units(2, 2, drop_layer=True)
    assert dropped == [["embed"], [1, "head"]]  # block 0 in no stage
    with pytest.raises(ValueError, match="more layers or fewer stages"):
        stage_units(2, 5)


def test_stage_placement_per_schedule():
    assert [stage_indices("1f1b", r, 4, 2) for r in range(4)] == [[0], [1], [2], [3]]
    assert [stage_indices("interleaved_1f1b", r, 2, 2) for r in range(2)] == [[0, 2], [1, 3]]
    assert [stage_indices("zbv", r, 2, 2) for r in range(2)] == [[0, 3], [1, 2]]
    with pytest.raises(ValueError, match="unknown"):
        stage_indices("zigzag", 0, 2, 2)


def golden_rows(value=1e-8, schedules=None, degree=2):
    return [
        Row(
            stage="pp", case=c, metric="max_abs_error", value=value, unit="abs", world=degree, algo=s, count=4
        )
        for s in (schedules or GLOO_CPU.section("pp").schedules)
        for c in pp.GOLDEN_CASES
    ]


def bubble_rows(expectations, offset=0.0, ranks=2):
    return [
        Row(
            stage="pp",
            case=e.case,
            metric="bubble",
            value=e.value + offset,
            unit="ratio",
            world=e.world,
            algo=e.algo,
            count=e.count,
            rank=r,
        )
        for e in expectations
        if e.metric == "bubble"
        for r in range(ranks)
    ]


def verdicts(rows, profile=GLOO_CPU):
    return {v.id: v.status for v in pp.judge(rows, pp.expect(profile, {}), {"profile": profile.to_dict()})}


def test_judge_passes_on_the_formula_and_fails_off_it():
    want = pp.expect(GLOO_CPU, {})
    sleep = [e for e in want if e.case == "sleep_stages"]
    assert len(sleep) == 9  # hand/1f1b/interleaved at M = 2, 3; gpipe at M = 1, 2, 3
    got = verdicts(golden_rows() + bubble_rows(want))
    cfg = GLOO_CPU.section("pp")
    assert len(got) == len(cfg.schedules) + len(cfg.bubble_schedules) + len(cfg.timed_schedules) == 5 + 4 + 1
    assert all(got[f"pp.golden.{s}.pp2"] == "pass" for s in GLOO_CPU.section("pp").schedules)
    assert all(got[f"pp.bubble.{s}"] == "pass" for s in GLOO_CPU.section("pp").bubble_schedules)
    assert got["pp.gpt_bubble.1f1b.pp2"] == "skip"  # a performance verdict: skipped on CPU
    off = verdicts(golden_rows() + bubble_rows(want, offset=1.2 * GLOO_CPU.section("pp").schedule_tolerance))
    assert all(off[f"pp.bubble.{s}"] == "fail" for s in GLOO_CPU.section("pp").bubble_schedules)
    # one slot waited for out of order at M = 3 (a step of 12 slot units becomes 13): ≥ 0.05 off, a fail
    assert GLOO_CPU.section("pp").schedule_tolerance < (1 - 9 / 13) - 0.25
    # idle moved from one rank to the other: the pipeline's bubble is the mean
    shifted = [
        dataclasses.replace(r, value=r.value + (0.06 if r.rank == 0 else -0.06)) for r in bubble_rows(want)
    ]
    assert verdicts(golden_rows() + shifted)["pp.bubble.gpipe"] == "pass"
    # the wall-clock rows beside them, however far off, are shown, not judged
    wall = [dataclasses.replace(r, metric="wall_bubble", value=r.value + 0.2) for r in bubble_rows(want)]
    assert verdicts(golden_rows() + bubble_rows(want) + wall)["pp.bubble.gpipe"] == "pass"
    one_rank = [r for r in bubble_rows(want) if not (r.algo == "gpipe" and r.count == 2 and r.rank == 1)]
    assert verdicts(golden_rows() + one_rank)["pp.bubble.gpipe"] == "fail"  # a rank's row missing


def test_judge_fails_a_missing_or_wrong_case():
    want = pp.expect(GLOO_CPU, {})
    rows = [r for r in golden_rows() if not (r.algo == "zbv" and r.case == "grads")] + bubble_rows(want)
    rows.append(
        Row(
            stage="pp",
            case="grads",
            metric="max_abs_error",
            value=math.inf,
            unit="abs",
            world=2,
            algo="zbv_typo",
            count=4,
        )
    )
    got = verdicts(rows)
    assert got["pp.golden.zbv.pp2"] == "fail" and got["pp.golden.gpipe.pp2"] == "pass"
    wrong = [
        r if not (r.algo == "1f1b" and r.case == "grads") else dataclasses.replace(r, value=math.inf)
        for r in golden_rows()
    ]
    assert verdicts(wrong + bubble_rows(want))["pp.golden.1f1b.pp2"] == "fail"
    largest_m = max(GLOO_CPU.section("pp").bubble_microbatches)
    missing_m = [r for r in bubble_rows(want) if not (r.algo == "gpipe" and r.count == largest_m)]
    assert verdicts(golden_rows() + missing_m)["pp.bubble.gpipe"] == "fail"


def test_gpt_bubble_warns_on_gpus_far_above_the_formula():
    want = pp.expect(NCCL_GPU, {})
    gpt = [e for e in want if e.case == "gpt"]
    assert {e.world for e in gpt} == {2, 4, 8}
    good = golden_rows(degree=8) + bubble_rows(want, ranks=1)
    assert verdicts(good, NCCL_GPU)["pp.gpt_bubble.1f1b.pp8"] == "pass"
    far = [dataclasses.replace(r, value=0.9) if r.case == "gpt" else r for r in good]
    assert verdicts(far, NCCL_GPU)["pp.gpt_bubble.1f1b.pp8"] == "warn"


def test_a_golden_m_torch_would_refuse_is_refused_before_the_run():
    pp.check_launch(NCCL_GPU)
    with pytest.raises(ProfileError, match="1f1b at PP=8"):
        pp.check_launch(
            NCCL_GPU.with_overrides(pp=dataclasses.replace(NCCL_GPU.section("pp"), golden_microbatches=4))
        )


def test_the_section_refuses_what_cannot_run():
    for bad in (
        {"schedules": ("gpipe", "zigzag")},
        {"timed_schedules": ("hand_1f1b",)},
        {"degrees": (1, 2)},
        {"forward_ms": 0.0},
    ):
        with pytest.raises(ProfileError, match="pp"):
            pp.PpConfig(**bad)


def test_one_rank_skips_the_stage_saying_why():
    one = get_profile("nccl-gpu", 1)
    assert pp.expect(one, {}) == []
    (only,) = pp.judge([], [], {"profile": one.to_dict()})
    assert only.status == "skip" and "Duplicate GPU" in only.reason


def test_the_worker_command_line_carries_the_section():
    args = pp.worker_args(get_profile("nccl-gpu", 4), ("unscaled_grads",))
    assert args[args.index("--degrees") + 1] == "2,4"
    assert args[args.index("--bubble-microbatches") + 1] == ",".join(map(str, range(1, 17)))
    assert args[-2:] == ["--mistakes", "unscaled_grads"]
    assert '"layers": 16' in args[1]


def test_figures_draw_the_measured_points_on_the_curve():
    want = pp.expect(GLOO_CPU, {})
    rows = pd.DataFrame([r.to_dict() for r in golden_rows() + bubble_rows(want)])
    expectations = pd.DataFrame([e.to_dict() for e in want])
    figs = pp_figures.figures(rows, expectations, {"profile": GLOO_CPU.to_dict()})
    assert len(figs) == 3 and all(isinstance(f, Figure) for f in figs)  # sleep, GPT, golden
    sleep_axes = figs[0].axes[0]
    # one curve for GPipe, 1F1B and the hand-written 1F1B, one for interleaved; the points of each schedule
    assert len(sleep_axes.lines) == 2 + len(GLOO_CPU.section("pp").bubble_schedules)
    assert pp_figures.figures(pd.DataFrame(), expectations, {}) == []
    memory = [
        Row(
            stage="pp",
            case="gpt",
            metric="activation_memory_bytes",
            value=2.0**30 * (r + 1),
            unit="bytes",
            world=2,
            algo="1f1b",
            count=8,
            rank=r,
        )
        for r in range(2)
    ]
    with_memory = pd.DataFrame([r.to_dict() for r in golden_rows() + bubble_rows(want) + memory])
    assert len(pp_figures.figures(with_memory, expectations, {"profile": GLOO_CPU.to_dict()})) == 4
