"""suite/stages/bandwidth/figure.py and crossover.py draw from the stages' rows and expectations."""

from __future__ import annotations

import pandas as pd

from suite.config import NCCL_GPU
from suite.costmodel.alphabeta import ring_allreduce_s, tree_allreduce_s
from suite.results import Expectation, Row, rows_to_frame
from suite.stages import _alphabeta_fit as alphabeta_fit
from suite.stages import bandwidth, crossover
from suite.stages.bandwidth import figure as bw_fig
from suite.stages.crossover import figure as cx_fig

SIZES = [2**k for k in range(3, 31, 3)]


def frame_of(expectations: list[Expectation]) -> pd.DataFrame:
    return pd.DataFrame([e.to_dict() for e in expectations])


def test_bandwidth_figures_draw_every_collective_and_the_fit():
    rows = []
    for source, placement in (("torch", "ip"), ("nccl-tests", "oop")):
        for coll in bandwidth.COLLECTIVES:
            for s in SIZES:
                t = ring_allreduce_s(s, 8, 5e-6, 300e9)
                rows += [
                    Row(
                        stage="bandwidth",
                        case=coll,
                        metric="time_us",
                        value=t * 1e6,
                        unit="us",
                        size_bytes=s,
                        source=source,
                        placement=placement,
                        world=8,
                    ),
                    Row(
                        stage="bandwidth",
                        case=coll,
                        metric="busbw",
                        value=s / t / 1e9,
                        unit="GB/s",
                        size_bytes=s,
                        source=source,
                        placement=placement,
                        world=8,
                    ),
                ]
    rows += alphabeta_fit.fit_rows(rows, 8)
    facts = {"topology": {"gpu_model": "NVIDIA H100 80GB HBM3", "nvlink": True, "nvlink_count": 18}}
    figs = bw_fig.figures(rows_to_frame(rows), frame_of(bandwidth.expect(NCCL_GPU, facts)), facts)
    assert len(figs) == 2
    busbw_axes = figs[0].get_axes()
    assert [ax.get_title() for ax in busbw_axes] == list(bandwidth.COLLECTIVES)
    assert len(busbw_axes[0].get_lines()) == 3  # torch, nccl-tests, the 70% floor
    assert (
        "α = 5 µs" in figs[1].get_axes()[0].get_title()
        and "β = 300 GB/s" in figs[1].get_axes()[0].get_title()
    )


def test_crossover_figure_marks_measured_and_predicted():
    rows = []
    for s in SIZES:
        for algo, model in (("ring", ring_allreduce_s), ("tree", tree_allreduce_s)):
            rows.append(
                Row(
                    stage="crossover",
                    case=algo,
                    metric="time_us",
                    value=model(s, 8, 5e-6, 200e9) * 1e6,
                    unit="us",
                    size_bytes=s,
                    source="hand",
                    algo=algo,
                    world=8,
                    placement="ip",
                )
            )
    rows += crossover.analysis_rows(rows, 8)
    ex = crossover.expect(NCCL_GPU, {"alpha_beta": {"alpha_s": 5e-6, "beta_Bps": 200e9, "source": "x"}})
    (fig,) = cx_fig.figures(rows_to_frame(rows), frame_of(ex), {})
    labels = [line.get_label() for line in fig.get_axes()[0].get_lines()]
    assert {
        "hand ring",
        "hand tree",
        "model ring",
        "model tree",
        "predicted crossover",
        "measured crossover (hand)",
    } <= set(labels)


def test_no_rows_no_figures():
    empty = rows_to_frame([])
    assert bw_fig.figures(empty, pd.DataFrame(), {}) == []
    assert cx_fig.figures(empty, pd.DataFrame(), {}) == []


def test_a_capture_of_one_collective_draws_one_panel_not_empty_ones():
    """An ingest of one all_reduce_perf capture once drew six panels, five empty but for a floor line."""
    rows = [
        Row(
            stage="bandwidth",
            case="all_reduce",
            metric="busbw",
            value=100.0 + k,
            unit="GB/s",
            size_bytes=s,
            source="nccl-tests",
            placement="oop",
            world=8,
        )
        for k, s in enumerate(SIZES)
    ]
    facts = {"topology": {"gpu_model": "NVIDIA H100 80GB HBM3", "nvlink": True, "nvlink_count": 18}}
    fig = bw_fig.figures(rows_to_frame(rows), frame_of(bandwidth.expect(NCCL_GPU, facts)), facts)[0]
    drawn = [ax for ax in fig.get_axes() if ax.get_visible()]
    assert [ax.get_title() for ax in drawn] == ["all_reduce"] and drawn[0].get_lines()
