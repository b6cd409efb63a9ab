"""`make demo`'s report in headless Chromium: the command the Makefile runs, on the captures it names."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from suite.ingest.inputs import KNOWN
from suite.results import RunDir

from .browser import chromium_binary
from .test_report_browser import assert_every_figure_rendered, look, shots_dir

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.needs("chromium"),
    pytest.mark.skipif(
        chromium_binary() is None, reason="chromium is not installed: apt-get install chromium"
    ),
]
REPO = Path(__file__).resolve().parents[2]


def demo_command(out: Path) -> list[str]:
    """The ingest line of `make demo` (a dry run: make prints it, runs nothing), aimed at `out`."""
    printed = subprocess.run(
        ["make", "-n", "demo"], cwd=REPO, capture_output=True, text=True, timeout=60, check=True
    )
    line = next(line for line in printed.stdout.splitlines() if " -m suite ingest " in line)
    # the recipe takes ingest's 3 (INCONCLUSIVE) as the demo's success
    argv = shlex.split(line.split(" || ")[0])
    argv[0] = sys.executable
    argv[argv.index("--out") + 1] = str(out)
    argv[argv.index("--record-last") + 1] = str(out / "LAST")
    return argv


def test_demo_report_in_chromium(tmp_path):
    done = subprocess.run(
        demo_command(tmp_path / "runs"), cwd=REPO, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 3, done.stderr  # INCONCLUSIVE, as suite check says of it
    assert [line for line in done.stderr.splitlines() if line.startswith("not used:")] == [
        f"not used: tests/data/nccl-tests/README.md: not a tool output ingest reads ({KNOWN}); "
        f"it starts '# nccl-tests captures'"
    ]
    run = RunDir.load(Path((tmp_path / "runs/LAST").read_text().strip()))
    verdicts = run.verdicts()
    wide, narrow = look(run.path / "report.html", shots_dir(tmp_path), "demo")
    assert wide["verdictRows"] == len(verdicts) > 10
    assert wide["sections"] == ["stage-topology", "stage-bandwidth"]
    # the peak verdict, as a person reads it
    assert "468.6 GB/s" in wide["text"] and "NVLink 4" in wide["text"]
    assert "fail" not in {v.status for v in verdicts}
    assert any(
        b.startswith("Judged from 2 captured file(s)") and "21-h100-all_reduce" in b for b in wide["banners"]
    )
    assert not [n for n in wide["notes"] if "figure" in n], "a figure module failed on the demo"
    assert wide["images"], "the demo report should carry figures (link matrix, busbw)"
    assert_every_figure_rendered(wide)
    assert_every_figure_rendered(narrow)
    assert narrow["overflow"] <= 0
