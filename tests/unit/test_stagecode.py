"""stage_code: the version `reports compare` uses to refuse comparing numbers made by different code — the
hash of the stage's folder, or the version it declares — and whether a stage starts ranks (the warm launcher's
cue)."""

from __future__ import annotations

from pathlib import Path

import pytest

from suite import stagecode


@pytest.fixture()
def tree(tmp_path, monkeypatch) -> Path:
    """A miniature suite/: a stage folder launching its worker by name, another stage, a shared library."""
    root = tmp_path / "suite"
    files = {
        "__init__.py": "",
        "stages/__init__.py": "",
        "stages/sweep/__init__.py": "from suite.costmodel import alphabeta\n"
        "def run(p, ctx):\n    ctx.torchrun('suite.stages.sweep.worker', [])\n",
        "stages/sweep/worker.py": "from suite.workloads.worker import worker_session\n",
        "stages/other/__init__.py": "def run(p, ctx):\n    pass\n",
        "costmodel/__init__.py": "",
        "costmodel/alphabeta.py": "ALPHA = 5e-6\n",
        "workloads/__init__.py": "",
        "workloads/worker.py": "X = 1\n",
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    monkeypatch.setattr(stagecode, "SUITE_ROOT", root)
    return root


def rel(paths, root):
    return [p.relative_to(root).as_posix() for p in paths]


def test_the_version_covers_the_stage_folder_and_nothing_else(tree):
    assert rel(stagecode.stage_files("sweep"), tree) == ["stages/sweep/__init__.py", "stages/sweep/worker.py"]
    before, other = stagecode.stage_code("sweep"), stagecode.stage_code("other")
    assert len(before) == 16 and before != other
    (tree / "workloads/worker.py").write_text("X = 2\n")  # a shared library: not the stage's version
    (tree / "costmodel/alphabeta.py").write_text("ALPHA = 6e-6\n")
    assert stagecode.stage_code("sweep") == before
    (tree / "stages/sweep/worker.py").write_text(
        "from suite.workloads.worker import worker_session  # edited\n"
    )
    assert stagecode.stage_code("sweep") != before
    (tree / "stages/sweep/rules.py").write_text("FLOOR = 0.7\n")  # a new file in the folder counts too
    changed = stagecode.stage_code("sweep")
    assert changed != before and stagecode.stage_code("other") == other


def test_a_declared_version_is_the_version_whatever_the_folder_holds(tree):
    assert stagecode.stage_code("sweep", "2") == "version 2"
    (tree / "stages/sweep/worker.py").write_text("X = 3\n")
    assert stagecode.stage_code("sweep", "2") == "version 2"


def test_a_stage_naming_a_worker_harness_or_launcher_starts_ranks(tree):
    assert stagecode.launches_ranks("sweep") and not stagecode.launches_ranks("other")
    (tree / "stages/other/__init__.py").write_text("from suite.launch.forklaunch import launch\n")
    assert stagecode.launches_ranks("other")


RANKED = {
    "health",
    "bandwidth",
    "crossover",
    "baseline",
    "tp",
    "dp",
    "zero",
    "overlap",
    "fault",
    "profile",
    "memory",
    "burnin",
    "pp",
    "cp",
    "ep",
    "precision",
    "nccl1gpu",
}
"""The house's stages that start ranks (every one but topology and pinned)."""


def test_the_real_stages_have_a_version_and_only_the_rankless_skip_the_launcher():
    from suite import stages

    assert len(stages.available()) >= 10
    for name in stages.available():
        assert stagecode.module_name(stagecode.stage_files(name)[0]) == f"suite.stages.{name}"
        assert len(stagecode.stage_code(name, stages.declaration(name).version)) == 16
    # topology reads tools (nvidia-smi, lscpu) and pinned copies on one process: neither starts ranks; every
    # other stage of the house does (a stage added since may do either)
    rankless = {n for n in stages.available() if not stagecode.launches_ranks(n)}
    assert {"topology", "pinned"} <= rankless
    assert not rankless & RANKED
