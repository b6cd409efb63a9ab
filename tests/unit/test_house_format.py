"""The house style: the formatter's layout, sorted imports and lines of at most 110 characters
(pyproject.toml's [tool.ruff]); `make format` applies it, `make lint` shows what differs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def ruff(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ruff", *args, "--no-cache"], cwd=cwd, capture_output=True, text=True
    )


def test_every_python_file_is_in_the_formatters_layout():
    done = ruff("format", "--check", ".")
    assert done.returncode == 0, f"run `make format`:\n{done.stdout[-3000:]}{done.stderr[-2000:]}"


def test_imports_are_sorted_and_lines_fit_in_110_characters():
    done = ruff("check", "--output-format", "concise", ".")
    assert done.returncode == 0, f"run `make format`, then wrap what it cannot:\n{done.stdout[-3000:]}"


def test_the_check_sees_tests_dist_and_fails_on_a_long_line(tmp_path):
    # ruff leaves folders named dist alone unless told otherwise; the distributed tests live in one
    listed = ruff("check", "--show-files", ".").stdout
    assert "tests/dist/test_launch.py" in listed
    (tmp_path / "pyproject.toml").write_text((REPO / "pyproject.toml").read_text())
    (tmp_path / "long.py").write_text(f"x = {'1 + ' * 40}1\n")
    assert ruff("format", "--check", ".", cwd=tmp_path).returncode == 1
    (tmp_path / "long.py").write_text(f'x = "{"a " * 60}"\n')
    assert "E501" in ruff("check", ".", cwd=tmp_path).stdout
