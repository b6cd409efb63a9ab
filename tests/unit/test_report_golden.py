"""The report's structure pinned against checked-in golden text (tests/report_structure.py says what it
holds).

The test only compares: a missing golden file fails, and no environment variable makes it write one
(a test that writes its expectation and then compares with it cannot fail). After an intended change
to the report, regenerate the file explicitly and review the diff before committing it:

    .venv/bin/python -m tests.update_golden      (or: make golden)
"""

from __future__ import annotations

from tests.report_structure import GOLDEN, current_structure, golden_problem
from tests.report_synthetic import only_installed_figures


def test_report_structure_matches_golden(tmp_path, monkeypatch):
    only_installed_figures(monkeypatch)  # which stages have figure modules must not change the golden text
    problem = golden_problem(current_structure(tmp_path))
    assert problem is None, problem


def test_a_missing_golden_fails_and_is_not_written(tmp_path, monkeypatch):
    monkeypatch.setenv("CARDTIME_UPDATE_GOLDEN", "1")  # the old way to regenerate: must not write any more
    missing = tmp_path / "report_structure.golden.txt"
    problem = golden_problem("# any structure\n", missing)
    assert problem is not None and "missing" in problem and "tests.update_golden" in problem
    assert not missing.exists()


def test_a_changed_structure_fails_naming_the_command(tmp_path):
    golden = tmp_path / "golden.txt"
    golden.write_text("section #a\n", encoding="utf-8")
    assert golden_problem("section #a\n", golden) is None
    problem = golden_problem("section #b\n", golden)
    assert problem is not None and "tests.update_golden" in problem
    assert golden.read_text(encoding="utf-8") == "section #a\n"  # compared, never rewritten


def test_the_checked_in_golden_is_not_empty():
    lines = GOLDEN.read_text(encoding="utf-8").splitlines()
    assert len(lines) > 20 and any(line.startswith("section #") for line in lines)
