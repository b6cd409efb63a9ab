"""Regenerate tests/data/report_structure.golden.txt from the current report code, then review the diff.

    .venv/bin/python -m tests.update_golden      (or: make golden)

The test (tests/unit/test_report_golden.py) only compares; this is the one place that writes the file.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import pytest

from tests.report_structure import GOLDEN, current_structure
from tests.report_synthetic import only_installed_figures


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp, pytest.MonkeyPatch.context() as monkeypatch:
        only_installed_figures(monkeypatch)  # as the test sees it: no stage's own figure module
        current = current_structure(Path(tmp))
    before = GOLDEN.read_text(encoding="utf-8") if GOLDEN.exists() else None
    GOLDEN.parent.mkdir(parents=True, exist_ok=True)
    GOLDEN.write_text(current, encoding="utf-8")
    state = "unchanged" if before == current else ("written" if before is None else "updated")
    print(f"{GOLDEN}: {state}; review it with `git diff -- tests/data/{GOLDEN.name}`")
    return 0


if __name__ == "__main__":
    sys.exit(main())
