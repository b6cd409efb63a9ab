"""The report as a person sees it: rendered, opened in headless Chromium, measured, screenshotted, printed.

Screenshots land in the test's tmp folder, or in $CARDTIME_SCREENSHOTS when set (to look at them):

    CARDTIME_SCREENSHOTS=/tmp/shots .venv/bin/python -m pytest -q tests/e2e/test_report_browser.py
"""

from __future__ import annotations

import base64
import os
import subprocess
import sys
from pathlib import Path

import pytest

from reports.report import render_path
from suite.results import RunDir
from tests.report_synthetic import (
    HOSTILE_GPU,
    HOSTILE_HOST,
    build_run,
    busbw_lines,
    install_figure_module,
    link_matrix,
    only_installed_figures,
)

from .browser import Browser, chromium_binary

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.needs("chromium"),
    pytest.mark.skipif(
        chromium_binary() is None, reason="chromium is not installed: apt-get install chromium"
    ),
]
REPO = Path(__file__).resolve().parents[2]

# What the page says about itself, measured by the browser after layout.
PAGE_FACTS = """(() => {
  const images = [...document.images].map(img => ({
    alt: img.alt, complete: img.complete, natural: img.naturalWidth,
    width: img.getBoundingClientRect().width, height: img.getBoundingClientRect().height}));
  const verdictTables = [...document.querySelectorAll('section.stage table')].filter(t => t.caption &&
    /^(Expected and observed, per check|Skipped checks)$/.test(t.caption.textContent.trim()));
  return {
    images,
    verdictRows: verdictTables.reduce((n, t) => n + t.tBodies[0].rows.length, 0),
    stageLines: document.querySelectorAll('tr.stage-line').length,
    badges: [...document.querySelectorAll('ul.attention .badge')].map(b => getComputedStyle(b).backgroundColor),
    sections: [...document.querySelectorAll('section.stage')].map(s => s.id),
    notes: [...document.querySelectorAll('p.note')].map(p => p.innerText),
    banners: [...document.querySelectorAll('p.banner')].map(p => p.innerText),
    scripts: document.scripts.length,
    text: document.body.innerText,
    overflow: document.documentElement.scrollWidth - window.innerWidth,
  };
})()"""  # noqa: E501


def shots_dir(tmp_path: Path) -> Path:
    folder = Path(os.environ.get("CARDTIME_SCREENSHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def look(report: Path, shots: Path, name: str) -> tuple[dict, dict]:
    """Facts of the page at a laptop width and at a phone width, with a full-page screenshot of each, and a
    PDF."""
    with Browser() as browser:
        browser.open(report, width=1280)
        wide = browser.evaluate(PAGE_FACTS)
        browser.screenshot(shots / f"{name}-wide.png")
        pdf = base64.b64decode(browser.call("Page.printToPDF", printBackground=True)["data"])
        (shots / f"{name}.pdf").write_bytes(pdf)
        browser.open(report, width=400, height=800)
        narrow = browser.evaluate(PAGE_FACTS)
        browser.screenshot(shots / f"{name}-narrow.png")
    assert pdf.startswith(b"%PDF") and pdf.count(b"/Type /Page") >= 2, (
        "the report should print to several pages"
    )
    return wide, narrow


def assert_every_figure_rendered(facts: dict) -> None:
    assert facts["images"], "no figure in the page: nothing to check"
    for image in facts["images"]:
        assert image["complete"] and image["natural"] > 0, f"figure not decoded: {image['alt']}"
        assert image["width"] > 100 and image["height"] > 50, f"figure drawn too small: {image}"


def test_synthetic_report_in_chromium(tmp_path, monkeypatch):
    only_installed_figures(monkeypatch)
    install_figure_module(monkeypatch, "bandwidth", busbw_lines)
    install_figure_module(monkeypatch, "topology", link_matrix)
    run = build_run(tmp_path / "run-a")
    report, view = render_path(run)
    wide, narrow = look(report, shots_dir(tmp_path), "synthetic")
    assert wide["verdictRows"] == len(view.verdicts) == 7  # every verdict in its stage's section
    assert wide["stageLines"] == 5 and len(wide["badges"]) == 4
    assert wide["badges"][0] == "rgb(179, 38, 30)"  # a failure on top, in red
    assert len(wide["images"]) == 2
    assert_every_figure_rendered(wide)
    assert_every_figure_rendered(narrow)
    assert wide["scripts"] == 0
    assert HOSTILE_HOST in wide["text"] and HOSTILE_GPU in wide["text"]  # shown as text, not run or drawn
    assert wide["sections"] == [
        "stage-topology",
        "stage-bandwidth",
        "stage-crossover",
        "stage-dp",
        "stage-fault",
    ]
    assert narrow["overflow"] <= 0, (
        "a phone-width window should not scroll sideways (wide tables scroll in place)"
    )


def test_rehearsal_report_in_chromium(rehearsal_run, tmp_path):
    """The real rehearsal's report: every verdict in its section, every figure drawn, no figure module
    failing."""
    result = subprocess.run(
        [sys.executable, "-m", "reports", str(rehearsal_run)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == f"report: {rehearsal_run / 'report.html'}"
    assert lines[1].endswith("skipped") and " passed, " in lines[1]
    run = RunDir.load(rehearsal_run)
    wide, narrow = look(rehearsal_run / "report.html", shots_dir(tmp_path), "rehearsal")
    assert wide["verdictRows"] == len(run.verdicts()) > 0
    assert wide["sections"] == [f"stage-{s}" for s in run.manifest["stages_selected"]]
    assert any("mean nothing about GPUs" in b for b in wide["banners"])
    assert not [n for n in wide["notes"] if "figure" in n], "a figure module failed on the rehearsal"
    assert wide["images"], "the rehearsal report should carry figures"
    assert_every_figure_rendered(wide)
    assert_every_figure_rendered(narrow)
    assert narrow["overflow"] <= 0
