"""The run report: rendered from a synthetic run directory, read back as HTML a browser would parse."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import urllib.parse
from html.parser import HTMLParser
from pathlib import Path

import pytest

from reports import report as report_module
from reports import tables
from reports.__main__ import main as reports_main
from reports.report import render_path
from tests.report_synthetic import (
    HOSTILE_GPU,
    HOSTILE_HOST,
    SIZES,
    broken_figures,
    build_run,
    busbw,
    busbw_lines,
    install_figure_module,
    link_matrix,
    only_installed_figures,
)

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _figures_of_these_tests_only(monkeypatch):
    """The stages' own figure modules are exercised on the real rehearsal (tests/e2e); here only the tests'
    own."""
    only_installed_figures(monkeypatch)


class Elements(HTMLParser):
    """Every start tag with its attributes, the text inside each element id'd section, and the document's
    text."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str]]] = []
        self.section: str | None = None
        self.section_text: dict[str, list[str]] = {}
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.tags.append((tag, attrs))
        if tag == "section":
            self.section = attrs.get("id")
            self.section_text.setdefault(self.section, [])
        if tag == "img" and self.section:
            self.section_text[self.section].append(f"<img alt={attrs.get('alt')}>")

    def handle_data(self, data):
        self.text.append(data)
        if self.section:
            self.section_text[self.section].append(data)

    def of(self, tag: str) -> list[dict[str, str]]:
        return [a for t, a in self.tags if t == tag]

    def in_section(self, section: str) -> str:
        return "".join(self.section_text.get(section, []))


def parse(html: str) -> Elements:
    parser = Elements()
    parser.feed(html)
    return parser


@pytest.fixture()
def gpu_run(tmp_path) -> Path:
    return build_run(tmp_path / "run-a")


def render(run_dir: Path) -> tuple[str, Elements]:
    out, _ = render_path(run_dir)
    html = out.read_text(encoding="utf-8")
    return html, parse(html)


def test_markup_from_the_run_renders_as_text(gpu_run):
    html, doc = render(gpu_run)
    assert HOSTILE_HOST not in html and "<img src=x" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    text = "".join(doc.text)
    assert HOSTILE_HOST in text and HOSTILE_GPU in text  # shown, as text, where a person looks for them
    assert not doc.of("script"), "the report must run no script"
    assert len(doc.tags) > 50  # the whole document was parsed, so the next line looked at every element
    assert all(not any(k.startswith("on") for k in attrs) for _, attrs in doc.tags), (
        "no event-handler attribute"
    )


def test_report_is_self_contained(gpu_run, monkeypatch):
    install_figure_module(monkeypatch, "bandwidth", busbw_lines)
    html, doc = render(gpu_run)
    assert doc.of("img") and doc.of("a"), "the checks below need the report's figures and links"
    for attrs in doc.of("img"):
        assert attrs["src"].startswith("data:image/svg+xml;charset=utf-8,")
        svg = urllib.parse.unquote(attrs["src"].split(",", 1)[1])
        # namespaces (xmlns="http://…") name, never fetch; an href or url() to the network would fetch
        assert "<svg" in svg and "href='http" not in svg and 'href="http' not in svg and "url(http" not in svg
    assert not doc.of("link") and not doc.of("script") and not doc.of("iframe")
    for attrs in doc.of("a"):
        assert not attrs["href"].startswith(("http:", "https:", "//")), attrs["href"]
    # the figures were checked above (url(#clip) is theirs)
    page = re.sub(r'src="data:image/svg\+xml;[^"]*"', "", html)
    assert len(page) < len(html) and "@import" not in page and "url(" not in page


def test_board_lists_failures_first_and_links_every_row_to_its_section(gpu_run):
    html, doc = render(gpu_run)
    view = report_module.load_run(gpu_run)
    board = report_module.board(view.verdicts)
    statuses = [row.status for row in board]
    assert statuses == sorted(statuses, key=["fail", "warn", "pass", "skip"].index)
    assert statuses[:3] == ["fail", "fail", "fail"] and len(board) == len(view.verdicts) == 7
    section_ids = {a.get("id") for a in doc.of("section")}
    board_links = [a["href"] for a in doc.of("a") if a["href"].startswith("#stage-")]
    assert board_links and {href[1:] for href in board_links} <= section_ids
    assert "2 passed, 1 warned, 3 failed, 1 skipped" in html


def test_one_section_per_stage_in_checklist_order(gpu_run):
    _, doc = render(gpu_run)
    ids = [a["id"] for a in doc.of("section") if a.get("class") == "stage"]
    assert ids == ["stage-topology", "stage-bandwidth", "stage-crossover", "stage-dp", "stage-fault"]
    assert "did not run" in doc.in_section("stage-dp")
    # a crash's full log tail is in its section (the board shows its first line)
    assert 'RuntimeError: <NCCL> & "watchdog" timeout' in doc.in_section("stage-fault")


def test_rehearsal_says_cpu_numbers_mean_nothing(tmp_path):
    cpu_html, _ = render(build_run(tmp_path / "cpu", gpu=False))
    gpu_html, _ = render(build_run(tmp_path / "gpu", gpu=True))
    assert "mean nothing about GPUs" in cpu_html.split('id="verdicts"')[0]  # at the top, before the board
    assert "mean nothing about GPUs" not in gpu_html


def test_expectations_sit_beside_the_median_of_what_was_measured(gpu_run):
    _, doc = render(gpu_run)
    import statistics

    largest = SIZES[-1]
    median = statistics.median(busbw(largest, "all_reduce", 1.0, r) for r in range(3))
    section = doc.in_section("stage-bandwidth")
    assert "Expected (before the run) and observed" in section
    assert f"{median:.4g}" in section and f"{median / 315.0:.4g}" in section
    assert "70% of NVLink 4 × 18 links (450 GB/s)" in section


def test_matching_values_honour_every_parameter_the_expectation_names(gpu_run):
    view = report_module.load_run(gpu_run)
    rows = view.stage_rows("bandwidth")
    expectation = view.stage_expectations("bandwidth").to_dict("records")[0]
    values = tables.matching_values(expectation, rows)
    assert len(values) == 3  # three repeats at that one size, of that one collective and metric
    expectation["size_bytes"] = None  # naming fewer parameters matches more rows
    assert len(tables.matching_values(expectation, rows)) == 3 * len(SIZES)


def test_figures_are_inlined_and_a_broken_module_is_a_note_not_a_failure(gpu_run, monkeypatch):
    install_figure_module(monkeypatch, "bandwidth", busbw_lines)
    install_figure_module(monkeypatch, "topology", link_matrix)
    install_figure_module(monkeypatch, "crossover", broken_figures)
    install_figure_module(monkeypatch, "fault", lambda rows, expectations, facts: ["not a figure"])
    _, doc = render(gpu_run)
    assert "<img alt=busbw vs size on " + HOSTILE_GPU in doc.in_section("stage-bandwidth")
    assert "<img alt=NVLinks between GPU pairs>" in doc.in_section("stage-topology")
    crossover = doc.in_section("stage-crossover")
    assert "suite/stages/crossover/figure.py raised ValueError: no busbw rows for this stage" in crossover
    assert "<img" not in crossover and "Measurements" in crossover  # the rest of the section is still there
    assert "returned a str as figure 1, not a matplotlib Figure" in doc.in_section("stage-fault")
    assert len(doc.of("img")) == 2


def test_raw_files_are_linked_relative_and_quoted(gpu_run):
    _, doc = render(gpu_run)
    hrefs = [a["href"] for a in doc.of("a")]
    assert "raw/topology/nvidia-smi-topo-m.txt" in hrefs
    assert "raw/topology/%3Ci%3Eodd%20%26%20name.log" in hrefs
    assert "raw/topology/<i>odd & name.log (35 B)" in doc.in_section("stage-topology")
    assert not any(".stage-" in h for h in hrefs)  # the runner's private files are not offered


def test_long_tables_are_cut_with_a_note_saying_where_the_rest_is(gpu_run, monkeypatch):
    monkeypatch.setattr(tables, "MAX_TABLE_ROWS", 10)
    _, doc = render(gpu_run)
    assert "first 10 of 132 rows shown; all of them are in results.csv / results.parquet" in doc.in_section(
        "stage-bandwidth"
    )


def test_cli_prints_the_path_and_the_summary(gpu_run, capsys):
    assert reports_main([str(gpu_run)]) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"report: {gpu_run / 'report.html'}",
        "summary: 2 passed, 1 warned, 3 failed, 1 skipped",
    ]
    assert (gpu_run / "report.html").stat().st_size > 10_000


def test_cli_refuses_another_schema_with_what_to_do(gpu_run, tmp_path, capsys):
    manifest = json.loads((gpu_run / "manifest.json").read_text())
    manifest["schema_version"] = 99
    (gpu_run / "manifest.json").write_text(json.dumps(manifest))
    assert reports_main([str(gpu_run)]) == 2
    assert "schema_version 99" in capsys.readouterr().err
    assert reports_main([str(tmp_path / "nothing")]) == 2
    assert "not a run directory" in capsys.readouterr().err


def test_python_m_reports_runs_the_same_entry_point(tmp_path):
    """`python -m reports` as a user types it (the in-process tests above cover what it prints)."""
    result = subprocess.run(
        [sys.executable, "-m", "reports", str(tmp_path / "nothing")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (
        result.returncode == 2 and "not a run directory" in result.stderr and "Traceback" not in result.stderr
    )


def test_a_stage_without_a_module_in_this_checkout_still_gets_its_section(gpu_run):
    from suite.results import Row, RunDir

    run = RunDir.load(gpu_run)
    run.replace_stage_rows(
        "future_stage", [Row(stage="future_stage", case="x", metric="m", value=1.0, unit="count")]
    )
    _, doc = render(gpu_run)
    ids = [a["id"] for a in doc.of("section") if a.get("class") == "stage"]
    assert ids[-1] == "stage-future_stage"
    assert "could not be loaded" in doc.in_section("stage-future_stage")
