"""The first screen's stage lines (each stage's declared headline, else the generic line), the stage texts a
run records for its report, folded tables and the figures' compact SVG."""

from __future__ import annotations

import json
import math

from reports import headline, tables
from reports.figures import compact_svg
from reports.report import render_path
from reports.runview import load_run
from suite import runner
from suite.config import GLOO_CPU
from suite.results import EXPECTATION_COLUMNS, ROW_COLUMNS, Expectation, Row, Verdict, records_to_frame
from suite.stages import bandwidth, tp
from tests.report_synthetic import build_run


def frame(records, columns):
    return records_to_frame(records, columns)


def test_bandwidth_headline_is_the_largest_all_reduce_against_its_floor():
    rows = [
        Row(
            stage="bandwidth",
            case="all_reduce",
            metric="busbw",
            value=v,
            unit="GB/s",
            size_bytes=s,
            source="nccl-tests",
        )
        for s, v in ((2**20, 100.0), (2**33, 362.4))
    ]
    rows.append(
        Row(
            stage="bandwidth",
            case="all_reduce",
            metric="busbw",
            value=999.0,
            unit="GB/s",
            size_bytes=2**34,
            source="torch",
        )
    )
    floor = [
        Expectation(
            stage="bandwidth",
            case="all_reduce",
            metric="busbw_min",
            value=315.0,
            unit="GB/s",
            basis="70% of NVLink",
        )
    ]
    assert (
        bandwidth.headline(rows, [], floor)
        == "all_reduce busbw 362.4 GB/s at 8 GiB (nccl-tests) · expected ≥ 315"
    )
    assert bandwidth.headline(rows[2:], [], []) == (
        "all_reduce busbw 999 GB/s at 16 GiB (torch) · no link peak to hold it to"
    )
    assert bandwidth.headline([], [], floor) is None


def test_tp_headline_is_the_highest_degree_against_the_ideal():
    rows = [
        Row(stage="tp", case="train_step", metric="speedup", value=v, unit="ratio", tp=d)
        for d, v in ((2, 1.9), (4, 3.1), (8, math.nan))
    ]
    ideal = [
        Expectation(
            stage="tp", case="train_step", metric="speedup", value=4.0, unit="ratio", tp=4, basis="d×"
        )
    ]
    # TP=8 measured nothing: not the headline
    assert tp.headline(rows, [], ideal) == "TP=4 speedup 3.1× · ideal 4×"


def test_a_stage_without_a_headline_gets_its_most_severe_verdict(monkeypatch):
    verdicts = [
        Verdict(id="drill.a", stage="drill", status="pass", expected="≤ 1 s", observed="0.2 s", reason="ok"),
        Verdict(id="drill.b", stage="drill", status="warn", expected="≤ 5 s", observed="7 s", reason="slow"),
        Verdict(
            id="drill.c", stage="drill", status="skip", expected="a GPU", observed="CPU", reason="CPU run"
        ),
    ]
    empty_rows, empty_exp = frame([], ROW_COLUMNS), frame([], EXPECTATION_COLUMNS)
    line = headline.stage_line("drill", "stage-drill", empty_rows, empty_exp, verdicts, "state: complete")
    assert (line.status, line.headline, line.counts) == ("warn", "b: 7 s · expected ≤ 5 s", "1 warn · 1 pass")
    assert (line.skip_line, line.skip_why, [s.id for s in line.skipped]) == (
        "1 skipped",
        "CPU run",
        ["drill.c"],
    )
    nothing = headline.stage_line(
        "drill", "stage-drill", empty_rows, empty_exp, [], "state: pending · did not run"
    )
    assert (nothing.status, nothing.headline) == ("none", "state: pending · did not run")


def test_a_headline_that_raises_falls_back_to_the_generic_line(monkeypatch):
    def broken(rows, verdicts, expectations):
        raise KeyError("no such row")

    monkeypatch.setattr(tp, "headline", broken)
    verdicts = [
        Verdict(id="tp.golden.tp2", stage="tp", status="fail", expected="≤ 1e-6", observed="3e-2", reason="x")
    ]
    line = headline.stage_line(
        "tp", "stage-tp", frame([], ROW_COLUMNS), frame([], EXPECTATION_COLUMNS), verdicts, ""
    )
    assert line.headline == "golden.tp2: 3e-2 · expected ≤ 1e-6"


def test_a_rehearsal_line_says_what_was_proven_and_greys_its_cpu_figure(monkeypatch):
    monkeypatch.setattr(headline, "declared_headline", lambda *args: "TP=4 speedup 0.04× · ideal 4×")

    def v(check, status, observed="x"):
        return Verdict(
            id=f"tp.{check}", stage="tp", status=status, expected="e", observed=observed, reason="r"
        )

    verdicts = [
        v("measured", "pass", "0.1 s"),
        v("golden.tp2", "pass", "logits 1e-07"),
        v("golden.tp4", "pass", "logits 2e-07"),
        v("scaling", "skip"),
    ]
    empty = frame([], ROW_COLUMNS), frame([], EXPECTATION_COLUMNS)
    line = headline.stage_line("tp", "stage-tp", *empty, verdicts, "", rehearsal=True)
    # the hardest equality check, never the CPU's speed, leads; the speed follows for the greyed span
    assert line.headline == "proven on CPU: golden.tp4: logits 2e-07" and line.status == "pass"
    assert line.cpu_figure == "TP=4 speedup 0.04× · ideal 4×"
    failed = headline.stage_line(
        "tp", "stage-tp", *empty, [*verdicts, v("golden.tp8", "fail", "3e-2")], "", True
    )
    assert failed.headline == "TP=4 speedup 0.04× · ideal 4×" and failed.cpu_figure == ""  # not proven
    waits = headline.stage_line("tp", "stage-tp", *empty, [v("scaling", "skip")], "", rehearsal=True)
    assert waits.headline == "nothing to prove on CPU: every check here needs a GPU"
    monkeypatch.setattr(headline, "declared_headline", lambda *args: "Golden.TP4: logits 2e-07")
    same = headline.stage_line("tp", "stage-tp", *empty, verdicts, "", rehearsal=True)
    assert same.cpu_figure == ""  # the figure that only repeats the proof is not shown twice
    monkeypatch.setattr(headline, "declared_headline", lambda *args: "TP=4 speedup 0.04× · ideal 4×")
    box = headline.stage_line("tp", "stage-tp", *empty, verdicts, "", judges_box=True)
    assert box.headline == "TP=4 speedup 0.04× · ideal 4×" and box.cpu_figure == ""  # a box's figures count


def test_the_run_records_its_stage_texts_and_the_report_shows_those(tmp_path):
    manifest = runner.initial_manifest(GLOO_CPU, "r", ["topology", "bandwidth"])
    assert set(manifest["stage_texts"]) == {"topology", "bandwidth"}
    assert manifest["stage_texts"]["bandwidth"]["measures"] == bandwidth.STAGE.measures
    run = build_run(tmp_path / "run")
    data = json.loads((run / "manifest.json").read_text())
    assert "stage_texts" not in data  # a run made before the texts were recorded: today's code speaks
    html = render_path(run)[0].read_text()
    assert f"Measures: {bandwidth.STAGE.measures}" in html
    data["stage_texts"] = {
        "bandwidth": {
            "title": "the old sweep",
            "measures": "busbw as that run's code measured it",
            "wrong": "what wrong looked like then",
            "rehearsal": "",
        }
    }
    (run / "manifest.json").write_text(json.dumps(data))
    view = load_run(run)
    assert view.text("bandwidth").recorded and not view.text("topology").recorded
    html = render_path(run)[0].read_text()
    assert (
        "Measures: busbw as that run&#39;s code measured it" in html
        and "bandwidth (checklist #2) — the old sweep" in html
    )
    assert f"Measures: {bandwidth.STAGE.measures}" not in html


def test_a_long_table_is_always_folded():
    short = tables.make_table("t", ["case"], [["a"]] * tables.MAX_OPEN_ROWS)
    long = tables.make_table("t", ["case"], [["a"]] * (tables.MAX_OPEN_ROWS + 1))
    assert not short.folded and long.folded and long.summary == f"t ({tables.MAX_OPEN_ROWS + 1} rows)"


def test_compact_svg_keeps_text_and_rounds_only_coordinates():
    svg = (
        '<?xml version="1.0" encoding="utf-8" standalone="no"?>\n<svg>\n  <g id="line2d_1">\n'
        '   <path d="M 1.234567 2.5\nL 3.14159 4" style="stroke-width: 0.812345"/>\n'
        '  </g>\n  <text x="10.98765" y="2" transform="rotate(-0 10.98765 2)">busbw 0.123456 '
        "GB/s</text>\n</svg>"
    )
    assert compact_svg(svg) == (
        "<svg><style>.a{stroke-width: 0.812345}</style><path d='M1.2 2.5L3.1 4' class='a'/>"
        "<text x='11' y='2'>busbw 0.123456 GB/s</text></svg>"
    )


def test_compact_svg_says_each_style_once_and_keeps_every_reference():
    style = "font-size: 10px; font-family: 'DejaVu Sans', sans-serif; text-anchor: end"
    svg = (
        '<svg><defs><style type="text/css">*{stroke-linecap: butt}</style>'
        '<clipPath id="p5b2ca39fa2"><rect x="0" y="0" width="10" height="10"/></clipPath></defs>'
        '<g><g><path d="M 0 0 L 5 5" clip-path="url(#p5b2ca39fa2)" style="stroke: #b0b0b0"/></g>'
        '<g transform="translate(1 2)">'
        + f'<text style="{style}">1 KiB</text><text style="{style}">1 MiB</text>'
        "</g></g></svg>"
    )
    out = compact_svg(svg)
    assert out.count("text-anchor: end") == 1 and out.count("DejaVu Sans") == 1
    # the most used style: the shortest name
    assert "<text class='a'>1 KiB</text><text class='a'>1 MiB</text>" in out
    assert "<clipPath id='i0'>" in out and ".b{clip-path: url(#i0); stroke: #b0b0b0}" in out
    assert "text{font-family:'DejaVu Sans', sans-serif}" in out
    # the bare groups went with their closing tags; the translated one kept its own
    assert "<path d='M0 0L5 5' class='b'/><g transform='translate(1 2)'>" in out and out.endswith(
        "</g></svg>"
    )
    assert out.count("<g") == out.count("</g>") == 1


def test_compact_svg_leaves_an_empty_group_and_the_groups_around_it_well_formed():
    """matplotlib writes an artist with nothing to draw as <g id="…"/>; taken for an opening tag, it once
    shifted which </g> was dropped, and Chromium decoded the topology matrix as nothing (the demo's
    report)."""
    from xml.dom import minidom

    svg = (
        '<svg><g id="axes_1"><g><g id="text_1"/><text x="1">NIC0</text></g>'
        '<g transform="translate(1 2)"><text>mlx5_0</text></g></g></svg>'
    )
    out = compact_svg(svg)
    minidom.parseString(out)  # raises on a tag left open or closed twice
    assert "<g id='i0'/><text x='1'>NIC0</text><g transform='translate(1 2)'><text>mlx5_0</text></g>" in out


def test_sections_drawn_in_workers_are_the_serial_ones(tmp_path, monkeypatch):
    from reports import report

    run = build_run(tmp_path / "run")
    monkeypatch.setenv("CARDTIME_FIGURE_CACHE", "off")  # both drawn, neither read back
    monkeypatch.setattr(report.os, "cpu_count", lambda: 2)
    parallel = render_path(run, tmp_path / "parallel.html")[0].read_text()
    monkeypatch.setattr(report, "PARALLEL", 1)
    serial = render_path(run, tmp_path / "serial.html")[0].read_text()
    assert parallel.count("<section") == 6 and parallel == serial
