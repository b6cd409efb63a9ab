"""Comparing runs: what is comparable, when a ratio is marked as beyond the noise, overlaid figures, the
CLI."""

from __future__ import annotations

import json

import pytest

from reports import compare, overlay
from reports.__main__ import main as reports_main
from tests.report_synthetic import (
    SIZES,
    build_run,
    busbw,
    busbw_lines,
    install_figure_module,
    link_matrix,
    only_installed_figures,
)


@pytest.fixture(autouse=True)
def _figures_of_these_tests_only(monkeypatch):
    """The stages' own figure modules are exercised on the real rehearsal (tests/e2e); here only the tests'
    own."""
    only_installed_figures(monkeypatch)


def metric_rows(comparison: compare.Comparison, stage: str) -> dict[tuple[str, str, str], list[str]]:
    """(case, metric, size) → the row's cells as text, from the stage's metric table."""
    section = next(s for s in comparison.stages if s.heading == stage)
    table = section.tables[0]
    headers = [h.text for h in table.headers]
    out = {}
    for row in table.rows:
        cells = [c.text for c in row]
        out[(cells[0], cells[1], cells[headers.index("size_bytes")])] = cells
    return out


def test_a_faster_box_is_marked_where_the_difference_exceeds_the_noise(tmp_path):
    a = build_run(tmp_path / "a", hostname="box-a")
    b = build_run(tmp_path / "b", hostname="box-b", bandwidth_scale=1.3)
    comparison = compare.compare([a, b])
    rows = metric_rows(comparison, "bandwidth")
    big = rows[("all_reduce", "busbw", "4 MiB")]
    expected_ratio = busbw(SIZES[-1], "all_reduce", 1.3, 1) / busbw(SIZES[-1], "all_reduce", 1.0, 1)
    assert big[-1] == f"{expected_ratio:.4g} ⚑"
    # at 4 B the α term dominates: the two boxes differ by less than their ±1% repeats
    small = rows[("all_reduce", "busbw", "4 B")]
    assert "⚑" not in small[-1] and float(small[-1]) == pytest.approx(1.0, abs=0.02)
    section = next(s for s in comparison.stages if s.heading == "bandwidth")
    assert section.marked > 0 and all(s.marked == 0 for s in comparison.stages if s.heading != "bandwidth")
    # marked rows come first
    first = section.tables[0].rows[0]
    assert first[-1].text.endswith("⚑") and first[-1].cls == "num marked"


def test_a_run_against_itself_marks_nothing(tmp_path):
    a = build_run(tmp_path / "a")
    b = build_run(tmp_path / "b")
    comparison = compare.compare([a, b])
    assert len(comparison.stages) >= 2 and [s.marked for s in comparison.stages] == [0] * len(
        comparison.stages
    )
    ratios = [r[-1] for r in metric_rows(comparison, "bandwidth").values()]
    assert len(ratios) >= 1 and set(ratios) == {"1"}, ratios


def test_without_repeats_the_noise_is_unknown_and_nothing_is_marked(tmp_path):
    a = build_run(tmp_path / "a", repeats=1)
    b = build_run(tmp_path / "b", bandwidth_scale=1.3, repeats=1)
    comparison = compare.compare([a, b])
    section = next(s for s in comparison.stages if s.heading == "bandwidth")
    assert section.marked == 0
    assert any("noise is unknown" in note for note in section.tables[0].notes)


def test_a_stage_whose_code_differs_is_not_compared(tmp_path):
    a = build_run(tmp_path / "a")
    b = build_run(tmp_path / "b", bandwidth_code="bw-code-2", bandwidth_scale=1.3)
    comparison = compare.compare([a, b])
    bandwidth = next(s for s in comparison.stages if s.heading == "bandwidth")
    assert bandwidth.tables == [] and bandwidth.figures == []
    assert bandwidth.notes == ["b not comparable with a: stage code differs (bw-code-1 vs bw-code-2)"]
    topology = next(s for s in comparison.stages if s.heading == "topology")
    assert topology.tables and not topology.notes


def test_comparability_rules(tmp_path):
    a = compare.open_run("a", build_run(tmp_path / "a"))
    b = compare.open_run("b", build_run(tmp_path / "b"))
    assert compare.comparable(a, b, "bandwidth") == ""
    for run in (a, b):  # runs that predate stage_code fall back to the commit
        for state in run.manifest["stages"].values():
            state.pop("stage_code", None)
    assert compare.comparable(a, b, "bandwidth") == ""
    b.manifest["git"] = {"commit": "fedcba9876543210", "dirty": False}
    assert "commits differ" in compare.comparable(a, b, "bandwidth")
    b.manifest["git"] = dict(a.manifest["git"], dirty=True)
    assert "uncommitted changes" in compare.comparable(a, b, "bandwidth")
    b.manifest["schema_version"] = 2
    assert compare.comparable(a, b, "bandwidth").startswith("schema version 1 vs 2")


def test_a_run_of_another_schema_is_shown_but_compared_with_nothing(tmp_path):
    a = build_run(tmp_path / "a")
    b = build_run(tmp_path / "b")
    manifest = json.loads((b / "manifest.json").read_text())
    manifest["schema_version"] = 99
    (b / "manifest.json").write_text(json.dumps(manifest))
    out = tmp_path / "compare.html"
    assert reports_main(["compare", str(a), str(b), "-o", str(out)]) == 0
    html = out.read_text()
    assert "cannot be read by this cardtime" in html
    assert html.count("not comparable with a: schema version 1 vs 99") == 5  # one note per stage


def test_cli_needs_two_runs_and_prints_where_the_comparison_is(tmp_path, capsys):
    a = build_run(tmp_path / "a")
    assert reports_main(["compare", str(a)]) == 2
    assert "at least two run directories" in capsys.readouterr().err
    b = build_run(tmp_path / "b", bandwidth_scale=1.3)
    out = tmp_path / "cmp.html"
    assert reports_main(["compare", str(a), str(b), "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    assert printed.splitlines()[0] == f"comparison: {out}"
    assert "bandwidth: 8 metric(s) differ beyond run-to-run noise" in printed


def test_lines_of_the_other_run_are_drawn_into_the_first_runs_axes(tmp_path):
    a = compare.open_run("a", build_run(tmp_path / "a"))
    b = compare.open_run("b", build_run(tmp_path / "b", bandwidth_scale=1.3))
    figs = [busbw_lines(r.view.stage_rows("bandwidth"), None, r.view.facts)[0] for r in (a, b)]
    [(merged, how)] = overlay.overlay(figs[0], [figs[1]], ["a", "b"])
    ax = merged.get_axes()[0]
    labels = [line.get_label() for line in ax.get_lines()]
    assert labels == [
        "all_gather (a)",
        "all_reduce (a)",
        "70% of peak (a)",
        "all_gather (b)",
        "all_reduce (b)",
    ]
    b_reduce = ax.get_lines()[4]
    # the median over b's repeats
    assert max(b_reduce.get_ydata()) == pytest.approx(
        sorted(busbw(SIZES[-1], "all_reduce", 1.3, r) for r in range(3))[1]
    )
    assert "b: thick translucent" in how


def test_bars_of_the_other_run_are_outlined_over_the_first_runs_bars():
    from matplotlib.figure import Figure
    from matplotlib.patches import Rectangle

    def bars(heights):
        fig = Figure()
        fig.add_subplot().bar(["DDP", "ZeRO-1", "ZeRO-3"], heights, label="step time")
        return fig

    [(merged, _)] = overlay.overlay(bars([1.0, 1.2, 2.0]), [bars([1.0, 1.1, 3.0])], ["a", "b"])
    ax = merged.get_axes()[0]
    outlined = [p for p in ax.patches if isinstance(p, Rectangle) and not p.get_fill()]
    assert [p.get_height() for p in outlined] == [1.0, 1.1, 3.0]
    assert "bars (b)" in ax.get_legend_handles_labels()[1]
    assert ax.get_ylim()[1] >= 3.0  # rescaled to show the taller bar


def test_images_are_shown_side_by_side_not_overlaid(tmp_path):
    figs = [link_matrix(None, None, {})[0] for _ in range(2)]
    shown = overlay.overlay(figs[0], [figs[1]], ["a", "b"])
    assert [how for _, how in shown] == ["run a", "run b"]


def test_compare_html_inlines_the_overlaid_figures(tmp_path, monkeypatch):
    install_figure_module(monkeypatch, "bandwidth", busbw_lines)
    install_figure_module(monkeypatch, "topology", link_matrix)
    a = build_run(tmp_path / "a")
    b = build_run(tmp_path / "b", bandwidth_scale=1.3)
    _, comparison = compare.render_compare([a, b], tmp_path / "cmp.html")
    by_stage = {s.heading: s for s in comparison.stages}
    assert len(by_stage["bandwidth"].figures) == 1  # one overlaid figure
    assert len(by_stage["topology"].figures) == 2  # the matrices side by side
    assert all(
        f.src.startswith("data:image/svg+xml;charset=utf-8,<svg") for f in by_stage["bandwidth"].figures
    )
