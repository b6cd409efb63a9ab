"""reports/figures/_plot.py: measured beside the model drawn one way in every figure; matplotlib's backend set
once."""

from __future__ import annotations

import ast
from pathlib import Path

import pandas as pd
import pytest

from reports.figures import _plot, stage_figures
from suite.results import Expectation, Row, rows_to_frame

REPO = Path(__file__).resolve().parents[2]


def test_measured_solid_with_markers_model_dashed_grey():
    fig, ax = _plot.new_figure(4, 3)
    _plot.measured_vs_model(ax, {1: 1.0, 2: 1.8}, {1: 1.0, 2: 2.0}, model_label="ideal", model_marker="x")
    measured, model = ax.get_lines()
    assert (measured.get_label(), measured.get_linestyle(), measured.get_marker()) == ("measured", "-", "o")
    assert (model.get_label(), model.get_linestyle(), model.get_marker(), model.get_color()) == (
        "ideal",
        "--",
        "x",
        "grey",
    )
    assert list(model.get_xdata()) == [1, 2] and list(model.get_ydata()) == [1.0, 2.0]


def test_a_paired_colour_and_points_only():
    fig, ax = _plot.new_figure(4, 3)
    _plot.measured_vs_model(ax, ([8, 16], [1.0, 2.0]), ([8, 16], [1.1, 2.1]), color="C3", points=True)
    measured, model = ax.get_lines()
    assert measured.get_color() == model.get_color() == "C3"
    assert measured.get_linestyle() == "None" and model.get_linestyle() == "--"


def test_an_empty_series_draws_nothing():
    fig, ax = _plot.new_figure(4, 3)
    _plot.measured_vs_model(ax, {1: 1.0}, {})
    _plot.measured_vs_model(ax, None, None)
    assert len(ax.get_lines()) == 1


def test_grouped_bars_are_centred_on_their_positions():
    fig, ax = _plot.new_figure(4, 3)
    _plot.grouped_bars(
        ax, [0, 1], [("a", [1, 2], None), ("b", [3, 4], "tab:blue"), ("c", [5, 6], None)], width=0.25
    )
    centres = sorted(round(p.get_x() + p.get_width() / 2, 6) for p in ax.patches)
    assert centres == [-0.25, 0.0, 0.25, 0.75, 1.0, 1.25]
    assert [p.get_height() for p in ax.patches] == [1, 2, 3, 4, 5, 6]


def test_style_sets_ticks_after_the_log_scale_that_would_reset_them():
    fig, ax = _plot.new_figure(4, 3)
    ax.plot([1, 2, 4, 8], [1, 2, 3, 4], label="x")
    _plot.style(
        ax,
        title="t",
        xlabel="d",
        ylabel="s",
        logx=2,
        logy=True,
        xticks=[1, 2, 4, 8],
        xticklabels=["1", "2", "4", "8"],
        grid="y",
    )
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    assert list(ax.get_xticks()) == [1, 2, 4, 8]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1", "2", "4", "8"]
    assert (ax.get_title(), ax.get_xlabel(), ax.get_ylabel()) == ("t", "d", "s")
    assert ax.get_legend() is not None


def test_matplotlib_backend_is_chosen_once():
    """Only reports/figures/__init__.py sets Agg; every figure module is imported through it."""
    calls = []
    for path in sorted((REPO / "reports").rglob("*.py")) + sorted((REPO / "suite").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "use"
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "matplotlib"
            ):
                calls.append(path.relative_to(REPO).as_posix())
    assert calls == ["reports/figures/__init__.py"]


def frames(rows: list[Row], expectations: list[Expectation]):
    return rows_to_frame(rows), pd.DataFrame([e.to_dict() for e in expectations])


def row(stage, metric, value, case="train_step", **kw):
    return Row(stage=stage, case=case, metric=metric, value=value, unit="x", **kw)


def expectation(stage, metric, value, case="train_step", **kw):
    return Expectation(stage=stage, case=case, metric=metric, value=value, unit="x", basis="b", **kw)


def labels(ax) -> list[str]:
    return [line.get_label() for line in ax.get_lines()]


def test_tp_and_dp_draw_measured_beside_the_model():
    rows = [row("tp", "speedup", s, tp=d) for d, s in ((1, 1.0), (2, 1.8), (4, 3.1))]
    rows += [row("tp", "max_abs_error", 1e-7, case="logits", tp=d) for d in (2, 4)]
    made = stage_figures(
        "tp", *frames(rows, [expectation("tp", "speedup", float(d), tp=d) for d in (1, 2, 4)]), {}
    )
    assert not made.notes and len(made.figures) == 2
    speedup = made.figures[0].axes[0]
    assert labels(speedup) == ["measured", "ideal (d×)"] and list(speedup.get_xticks()) == [1, 2, 4]

    rows = [
        row("dp", m, v / d, world=d)
        for d in (1, 2, 4)
        for m, v in (("tokens_per_s_per_rank", 900.0), ("efficiency", 1.0))
    ]
    model = [
        expectation("dp", m, v / d, world=d)
        for d in (1, 2, 4)
        for m, v in (("tokens_per_s_per_rank", 1000.0), ("efficiency", 1.0))
    ]
    made = stage_figures("dp", *frames(rows, model), {})
    assert not made.notes and len(made.figures) == 1  # no golden rows: no golden figure
    assert [labels(ax) for ax in made.figures[0].axes] == [
        ["measured", "α-β model"],
        ["measured", "α-β model", "verdict floor: 80% of the model"],
    ]


def test_zero_and_baseline_hold_the_measurement_to_its_limit():
    rows = [
        row("zero", m, v * (1 - 0.2 * z), zero=z)
        for z in range(4)
        for m, v in (("step_time_s", 0.1), ("peak_memory_bytes", 3e9))
    ]
    made = stage_figures(
        "zero", *frames(rows, [expectation("zero", "state_memory_bytes", 2e9, zero=z) for z in range(4)]), {}
    )
    assert not made.notes and len(made.figures) == 1
    memory, steps = made.figures[0].axes
    assert len(memory.patches) == 12  # 4 stages × (peak, state, expected)
    assert labels(steps) == ["1.5 × DDP"] and steps.get_lines()[0].get_ydata()[0] == pytest.approx(150.0)

    rows = [
        row("baseline", m, v, tp=1) for m, v in (("step_time_s", 0.07), ("tokens_per_s", 1e5), ("mfu", 0.4))
    ]
    made = stage_figures("baseline", *frames(rows, [expectation("baseline", "mfu", 0.3, tp=1)]), {})
    assert not made.notes and len(made.figures) == 1
    assert labels(made.figures[0].axes[1]) == ["floor 30%"]
