"""The precision stage on CPU: real fp16/bf16 autocast numerics, and every check shown able to fail."""

from __future__ import annotations

import dataclasses

import pandas as pd
import pytest
import torch
from matplotlib.figure import Figure

from suite.config import GLOO_CPU
from suite.stages import precision as stage
from suite.stages.precision import figure
from suite.stages.precision.worker import precision_rows, train
from tests.factories import by_id

PC = GLOO_CPU.section("precision")
FACTS = {"profile": GLOO_CPU.to_dict()}


@pytest.fixture(scope="module")
def rows():
    torch.set_num_threads(1)
    return precision_rows(PC.model(), torch.device("cpu"), PC)


def replaced(rows, case, metric, dtype, value):
    hits = [i for i, r in enumerate(rows) if (r.case, r.metric, r.dtype) == (case, metric, dtype)]
    assert len(hits) == 1
    out = list(rows)
    out[hits[0]] = dataclasses.replace(rows[hits[0]], value=value)
    return out


def test_every_check_passes_on_the_real_run(rows):
    verdicts = by_id(stage.judge(rows, stage.expect(GLOO_CPU, {}), FACTS))
    assert len(verdicts) == 9
    assert {v.status for v in verdicts.values()} == {"pass"}, [
        v for v in verdicts.values() if v.status != "pass"
    ]
    losses = [r for r in rows if r.metric == "loss"]
    assert len(losses) == 4 * PC.steps


def test_the_probe_counts_real_losses(rows):
    def count(case, metric, dtype):
        return next(r.value for r in rows if (r.case, r.metric, r.dtype) == (case, metric, dtype))

    assert count("probe.underflow", "grads_zeroed", "fp16") > 0.5 * count(
        "probe.underflow", "grads_total", "fp16"
    )
    assert count("probe.overflow", "grads_nonfinite", "fp16") > 0
    assert count("probe.underflow", "grads_zeroed", "bf16") == 0
    assert count("probe.overflow", "grads_nonfinite", "bf16") == 0


def test_an_unscaled_fp16_run_is_caught(rows):
    """The fp16 run meant to carry a GradScaler, run without it: its curve and its skip count fail."""
    unscaled = train(PC.model(), torch.device("cpu"), PC, "fp16_scaler", use_scaler=False)
    mixed = [r for r in rows if not (r.case == "train" and r.dtype == "fp16_scaler")] + unscaled
    verdicts = by_id(stage.judge(mixed, [], FACTS))
    assert verdicts["precision.curve.fp16_scaler"].status == "fail"
    assert "without loss scaling" in verdicts["precision.curve.fp16_scaler"].reason
    assert verdicts["precision.scaler.skipped_steps"].status == "fail"
    assert verdicts["precision.curve.bf16"].status == "pass"


def test_a_bf16_loss_or_a_wrong_clip_ratio_fails(rows):
    lost = replaced(rows, "probe.overflow", "grads_nonfinite", "bf16", 3.0)
    assert by_id(stage.judge(lost, [], FACTS))["precision.probe.bf16_range"].status == "fail"
    ratio = next(r.value for r in rows if r.metric == "scaled_norm_ratio")
    wrong = replaced(rows, "train", "scaled_norm_ratio", "fp16_scaler", ratio / 2)
    assert by_id(stage.judge(wrong, [], FACTS))["precision.clip.after_unscale"].status == "fail"
    trained = replaced(rows, "train", "zero_grad_steps", "fp16_unscaled", 0.0)
    assert by_id(stage.judge(trained, [], FACTS))["precision.train.fp16_unscaled_stalls"].status == "fail"


def test_missing_runs_fail_not_raise():
    verdicts = stage.judge([], [], FACTS)
    assert len(verdicts) == 2 and {v.status for v in verdicts} == {"fail"}


def test_the_figure_draws_four_curves(rows):
    frame = pd.DataFrame([r.to_dict() for r in rows])
    figs = figure.figures(frame, pd.DataFrame(), FACTS)
    assert len(figs) == 1 and isinstance(figs[0], Figure)
    assert len(figs[0].axes[0].get_lines()) == 4
