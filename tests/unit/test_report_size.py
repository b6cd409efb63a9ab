"""A rehearsal-shaped report stays ≤ 600 KB (issue 17: one file a person opens from an e-mail or a bucket).

Size is deterministic (the figures' SVG has a fixed hash salt and no date), so it is asserted; render time is
not (a shared 2-core machine is too noisy): `make bench` prints it against the baseline renderer.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from reports.report import render_path

REHEARSAL = Path(__file__).resolve().parents[1] / "data" / "report" / "rehearsal-20261201"
LIMIT_BYTES = 600 * 1024


def rehearsal_copy(tmp_path: Path) -> Path:
    run = tmp_path / "20261201T1220Z-vm-gloo-cpu"
    shutil.copytree(REHEARSAL, run, ignore=shutil.ignore_patterns("README.md", "raw-files.txt"))
    for name in (REHEARSAL / "raw-files.txt").read_text().split():
        (run / name).parent.mkdir(parents=True, exist_ok=True)
        (run / name).touch()
    return run


def test_a_rehearsals_report_is_at_most_600_kb(tmp_path):
    run = rehearsal_copy(tmp_path)
    html = render_path(run)[0].read_text()
    # every figure there
    assert (
        len(re.findall(r'<section[^>]*id="stage-', html)) == 18
        and html.count('<img src="data:image/svg+xml') >= 25
    )
    assert len(html.encode()) <= LIMIT_BYTES, f"{len(html.encode()) / 1024:.0f} KB > 600 KB"
    # and every figure says what good looks like, its log ticks in plain text (no mathtext 10^{-8} left)
    captions = re.findall(r"<figcaption>(.*?)</figcaption>", html)
    assert len(captions) == html.count('<img src="data:image/svg+xml')
    assert [c for c in captions if not c.startswith("Good")] == []
    assert "mathdefault" not in html
