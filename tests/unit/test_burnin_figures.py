"""The burn-in's report figures from real sampler captures: one clock figure per GPU, each with its
caption."""

from __future__ import annotations

from pathlib import Path

from matplotlib.figure import Figure

from suite.hardware import gpu_sampler
from suite.results import rows_to_frame
from suite.stages.burnin import figure as figures_module
from tests.unit.performance_rows import rows_from_performance

DATA = Path(__file__).resolve().parents[1] / "data"


def test_one_clock_figure_per_gpu_from_real_captures():
    looped = gpu_sampler.rows_from_query_csv(
        (DATA / "smi-sampling" / "query-csv-02-rtx-loop-ksysguard-27.csv").read_text(), "burnin"
    )
    braked = rows_from_performance(
        (DATA / "health" / "nvsmi-q-11-h100x8-535-hw-power-brake-active.txt").read_text(), "burnin"
    )
    frame = rows_to_frame(looped + braked)
    drawn = figures_module.figures(frame, None, {"profile": {"judge_performance": True}})
    assert len(drawn) == 8 and all(isinstance(f, Figure) for f in drawn)  # GPUs 0–7 (0 from both captures)
    assert all(f.caption.startswith("Good:") for f in drawn)
    first = drawn[0].get_axes()[0]
    # the 13 SM clock samples
    assert first.get_title() == "GPU 0" and len(first.get_lines()[0].get_xdata()) == 13
