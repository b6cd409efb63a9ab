"""The report's first screen, as a person sees it in Chromium at 1366×768 and in a half-screen window
(683×768): the verdict count, every stage's headline line and every failure's reason lie within the first 768
px.

Checked in the DOM (bounding boxes after layout) and by the screenshot of that first screen, on a GPU
run's report (`suite ingest` on the real captures `make demo` names), on a synthetic GPU run carrying
failures and warnings, and on a rehearsal's (the rehearsal fixture other e2e tests share: no new launch).
"""

from __future__ import annotations

import struct
import subprocess
from pathlib import Path

import pytest

from reports.report import render_path
from suite.results import RunDir
from tests.report_synthetic import build_run

from .browser import Browser, chromium_binary
from .test_demo_browser import demo_command
from .test_report_browser import shots_dir

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.needs("chromium"),
    pytest.mark.skipif(
        chromium_binary() is None, reason="chromium is not installed: apt-get install chromium"
    ),
]
REPO = Path(__file__).resolve().parents[2]
SCREEN_HEIGHT = 768
WINDOWS = (1366, 683)

FIRST_SCREEN = """(() => {
  const box = el => { const r = el.getBoundingClientRect(); return {top: r.top, bottom: r.bottom, text: el.innerText}; };
  const summary = document.querySelector('p.summary');
  return {
    summary: summary ? box(summary) : null,
    lines: [...document.querySelectorAll('tr.stage-line')].map(tr => ({
      stage: tr.dataset.stage, link: tr.querySelector('td.name a').getAttribute('href'),
      headline: box(tr.querySelector('td.headline')),
      colors: [tr.querySelector('td.headline .line'), tr.querySelector('.cpu-figure')].map(
        el => el ? getComputedStyle(el).color : null)})),
    attention: [...document.querySelectorAll('ul.attention li')].map(li => ({
      check: li.dataset.check, ...box(li), reason: box(li.querySelector('.reason'))})),
    sections: [...document.querySelectorAll('section.stage')].map(s => s.id),
    next_steps: [...document.querySelectorAll('div.next-steps li')].map(box),
    overflow: document.documentElement.scrollWidth - window.innerWidth,
    height: document.documentElement.scrollHeight,
  };
})()"""  # noqa: E501


def png_size(path: Path) -> tuple[int, int]:
    header = path.read_bytes()[:24]
    assert header[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return struct.unpack(">II", header[16:24])


def first_screens(report: Path, shots: Path, name: str) -> dict[int, dict]:
    """The first screen's facts at each window width, with a screenshot of exactly that screen."""
    out = {}
    with Browser() as browser:
        for width in WINDOWS:
            browser.open(report, width=width, height=SCREEN_HEIGHT)
            facts = browser.evaluate(FIRST_SCREEN)
            shot = browser.screenshot(shots / f"{name}-first-screen-{width}.png", full_page=False)
            facts["screenshot"] = png_size(shot)
            out[width] = facts
    return out


def assert_answer_on_first_screen(facts: dict, run: RunDir, width: int) -> None:
    verdicts = run.verdicts()
    stages = run.manifest["stages_selected"]
    where = f"at {width}×{SCREEN_HEIGHT}"
    assert facts["screenshot"] == (width, SCREEN_HEIGHT), f"the screenshot is not one first screen {where}"
    assert facts["summary"] and facts["summary"]["bottom"] <= SCREEN_HEIGHT, (
        f"the verdict count is below the fold {where}"
    )
    counts = {s: sum(v.status == s for v in verdicts) for s in ("pass", "warn", "fail", "skip")}
    assert (
        f"{counts['pass']} passed, {counts['warn']} warned, {counts['fail']} failed, {counts['skip']} skipped"
        in facts["summary"]["text"]
    )
    assert [line["stage"] for line in facts["lines"]] == stages and len(stages) > 0
    assert [line["link"] for line in facts["lines"]] == [f"#{s}" for s in facts["sections"]]
    for line in facts["lines"]:
        assert line["headline"]["text"].strip(), f"stage {line['stage']} has an empty headline"
        assert line["headline"]["bottom"] <= SCREEN_HEIGHT, (
            f"stage {line['stage']}'s headline is below the fold {where}"
        )
    wanted = sorted(v.id for v in verdicts if v.status in ("fail", "warn"))
    assert sorted(a["check"] for a in facts["attention"]) == wanted
    for item in facts["attention"]:
        assert item["reason"]["text"].strip() and item["bottom"] <= SCREEN_HEIGHT, (
            f"{item['check']}'s reason is below the fold {where}"
        )
    assert facts["overflow"] <= 0, f"the page scrolls sideways {where}"


def test_first_screen_of_a_gpu_run_from_real_captures(tmp_path):
    done = subprocess.run(
        demo_command(tmp_path / "runs"), cwd=REPO, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 3, done.stderr  # INCONCLUSIVE, as suite check says of it
    run = RunDir.load(Path((tmp_path / "runs/LAST").read_text().strip()))
    screens = first_screens(run.path / "report.html", shots_dir(tmp_path), "demo")
    for width, facts in screens.items():
        assert_answer_on_first_screen(facts, run, width)
    # INCONCLUSIVE: what to capture next for each open check, above the fold
    for (
        width,
        facts,
    ) in screens.items():
        steps = facts["next_steps"]
        assert steps and all(step["bottom"] <= SCREEN_HEIGHT for step in steps), (width, steps)
        said = " ".join(step["text"] for step in steps)
        assert (
            "sudo dmesg -T > dmesg.txt" in said and "nvidia-smi -q > smi-q.txt" in said and "(health)" in said
        )
        assert (
            "dcgmi diag -r 1" in said and "python -m suite ingest" in said and "all_reduce_perf -b 8" in said
        )
    headlines = {line["stage"]: line["headline"]["text"] for line in screens[1366]["lines"]}
    assert headlines["bandwidth"].startswith(
        "all_reduce busbw 468.6 GB/s at 2 GiB (nccl-tests) · expected ≥ 31"
    )
    assert "28×NV18" in headlines["topology"]


def test_first_screen_shows_every_failure_and_its_reason(tmp_path):
    run_dir = build_run(tmp_path / "run-a")
    report, _ = render_path(run_dir)
    run = RunDir.load(run_dir)
    assert sum(v.status in ("fail", "warn") for v in run.verdicts()) == 4
    screens = first_screens(report, shots_dir(tmp_path), "synthetic")
    for width, facts in screens.items():
        assert_answer_on_first_screen(facts, run, width)
    reasons = [a["reason"]["text"] for a in screens[1366]["attention"]]
    assert reasons[0].startswith(
        "large-message busbw below 70% of the NVLink peak: check `nvidia-smi topo -m`"
    )
    # the crash's first line; its log tail is in the section
    assert any(r == "torchrun exited 1" for r in reasons)


def test_first_screen_of_the_rehearsal(rehearsal_run, tmp_path):
    report, _ = render_path(rehearsal_run, tmp_path / "report.html")
    run = RunDir.load(rehearsal_run)
    screens = first_screens(report, shots_dir(tmp_path), "rehearsal")
    for width, facts in screens.items():
        assert_answer_on_first_screen(facts, run, width)
    headlines = {line["stage"]: line["headline"]["text"] for line in screens[1366]["lines"]}
    # each line says what the stage proved on CPU; its own figure, a CPU's, follows greyed
    proofs = {stage: text.split(" · CPU figure: ")[0] for stage, text in headlines.items()}
    figures = {
        stage: text.split(" · CPU figure: ")[1] for stage, text in headlines.items() if "CPU figure" in text
    }
    assert all(p.startswith(("proven on CPU: ", "nothing to prove on CPU")) for p in proofs.values()), proofs
    for line in screens[1366]["lines"]:  # the figure greyed (the skip colour, #6e7781), the proof not
        line_colour, figure_colour = line["colors"]
        assert figure_colour in (None, "rgb(110, 119, 129)") and line_colour != "rgb(110, 119, 129)", line
    assert proofs["dp"].startswith("proven on CPU: golden.world4: max |Δ parameter| = ")
    assert proofs["burnin"].startswith("proven on CPU: sdc.") and "bit-identical" in proofs["burnin"]
    assert figures["bandwidth"].startswith("all_reduce busbw ") and "(torch)" in figures["bandwidth"]
    assert figures["tp"].startswith("TP=") and "ideal" in figures["tp"]
    # the newer stages' own headlines, not the generic most-severe-verdict line
    assert figures["pp"].startswith("sleep stages ") and " vs formula " in figures["pp"]
    assert figures["memory"].startswith("state ") and "largest batch" in figures["memory"]
    assert " of its peers'" in figures["health"] and "final loss fp32" in figures["precision"]
    # the report the rehearsal itself rendered: within issue 17's size (test_report_size.py holds a fixture to
    # it)
    assert (rehearsal_run / "report.html").stat().st_size <= 600 * 1024
