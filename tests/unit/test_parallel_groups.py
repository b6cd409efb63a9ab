"""tests/parallel_groups.py: which serial line each end-to-end file joins (the collection hook refuses a file
in the wrong one; this holds the lists themselves to the files)."""

from __future__ import annotations

import re
from pathlib import Path

from tests import parallel_groups as groups

REPO = Path(__file__).resolve().parents[2]
# What a lab test imports: the namespaces' cluster, or the Slurm lab and hostile lab built on it.
LAB_IMPORT = re.compile(r"^from tests\.e2e\.(two_nodes|slurm_cluster|hostile_lab) import", re.M)


def e2e_files() -> list[str]:
    return sorted(str(p.relative_to(REPO)) for p in (REPO / "tests" / "e2e").glob("test_*.py"))


def test_every_file_that_builds_a_lab_is_on_the_labs_line_and_no_other():
    builds_a_lab = [f for f in e2e_files() if LAB_IMPORT.search((REPO / f).read_text())]
    assert builds_a_lab == sorted(groups.MAKES_NAMESPACES)
    assert {groups.line_of(f) for f in builds_a_lab} == {groups.LABS}


def test_every_other_e2e_file_and_the_rehearsals_readers_are_on_the_local_line():
    others = [f for f in e2e_files() if f not in groups.MAKES_NAMESPACES]
    assert others and {groups.line_of(f) for f in [*others, *groups.SHARES_THE_REHEARSAL]} == {groups.LOCAL}
    assert all((REPO / f).exists() for f in groups.SHARES_THE_REHEARSAL)


def test_a_unit_module_is_its_own_unit_and_a_class_stays_with_its_module():
    assert groups.scope_of("tests/unit/test_world.py::test_one[2]") == "tests/unit/test_world.py"
    assert groups.scope_of("tests/unit/test_world.py::TestWorld::test_two") == "tests/unit/test_world.py"
    assert groups.scope_of("tests/e2e/test_slurm_host.py::test_x") == groups.LABS
    assert groups.scope_of("tests/e2e/test_rehearsal.py::test_y") == groups.LOCAL
