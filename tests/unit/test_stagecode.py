"""stage_code: the fingerprint `reports compare` uses to refuse comparing numbers made by different code."""

from __future__ import annotations

from pathlib import Path

import pytest

from suite import stagecode


@pytest.fixture()
def tree(tmp_path, monkeypatch) -> Path:
    """A miniature suite/: a stage importing a model module and launching a workload by name."""
    root = tmp_path / "suite"
    files = {
        "__init__.py": "",
        "results.py": "SCHEMA = 1\n",
        "stages/__init__.py": "",
        "stages/sweep.py": "from ..costmodel import alphabeta\nfrom ..results import SCHEMA\n"
                           "def run(p, ctx):\n    ctx.torchrun('suite.workloads.collectives', [])\n",
        "stages/other.py": "def run(p, ctx):\n    pass\n",
        "costmodel/__init__.py": "",
        "costmodel/alphabeta.py": "ALPHA = 5e-6\n",
        "workloads/__init__.py": "",
        "workloads/collectives.py": "from suite.workloads import helpers\n",
        "workloads/helpers.py": "X = 1\n",
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    monkeypatch.setattr(stagecode, "SUITE_ROOT", root)
    return root


def rel(paths, root):
    return [p.relative_to(root).as_posix() for p in paths]


def test_the_fingerprint_covers_the_measuring_code_a_stage_reaches(tree):
    assert rel(stagecode.stage_files("sweep"), tree) == [
        "costmodel/__init__.py", "costmodel/alphabeta.py", "stages/sweep.py", "workloads/__init__.py", "workloads/collectives.py",
        "workloads/helpers.py"]  # results.py (plumbing, versioned by the schema) is left out


def test_a_change_in_reached_code_changes_it_and_plumbing_does_not(tree):
    before = stagecode.stage_code("sweep")
    other = stagecode.stage_code("other")
    (tree / "results.py").write_text("SCHEMA = 2\n")
    assert stagecode.stage_code("sweep") == before
    (tree / "workloads/helpers.py").write_text("X = 2\n")
    assert stagecode.stage_code("sweep") != before
    assert stagecode.stage_code("other") == other and len(other) == 16


def test_the_real_stages_have_a_fingerprint():
    from suite import stages

    assert len(stages.available()) >= 10
    for name in stages.available():
        assert stagecode.module_path(f"suite.stages.{name}") in stagecode.stage_files(name)
