"""Every stage keeps the contract the runner relies on (docs/stages.md); everything about a stage comes from
its module."""

import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

from suite import stages
from suite.config import ConfigSection

ROOT = Path(__file__).resolve().parents[2]


def test_every_stage_module_is_in_the_registry_in_an_order_its_declarations_allow():
    present = sorted(m.name for m in pkgutil.iter_modules(stages.__path__) if not m.name.startswith("_"))
    assert len(present) >= 10
    assert sorted(stages.available()) == present
    position = {name: i for i, name in enumerate(stages.ORDER)}
    for name in stages.ORDER:
        declared = stages.declaration(name)
        assert all(position[a] < position[name] for a in declared.after), name
        assert all(position[b] > position[name] for b in declared.before), name
    rows = [stages.CHECKLIST_ROW[name] for name in stages.ORDER]
    assert len(set(rows)) == len(rows)
    # The checklist's ten, in its run order (rows 6 and 7, 8 swap: the scaling experiments run together
    # first), whatever stages are added around them.
    ten = [
        "topology",
        "bandwidth",
        "crossover",
        "baseline",
        "tp",
        "dp",
        "zero",
        "overlap",
        "fault",
        "profile",
    ]
    assert [n for n in stages.ORDER if n in ten] == ten
    assert [stages.CHECKLIST_ROW[n] for n in ten] == [1, 2, 3, 4, 5, 7, 8, 6, 9, 10]


@pytest.mark.parametrize("name", stages.ORDER)
def test_stage_has_the_three_functions_and_its_words(name):
    declared = stages.declaration(name)
    module = stages.load(name)
    for fn in ("expect", "run", "judge", "estimate"):
        # the declaration names the folder's own functions
        assert getattr(declared, fn) is getattr(module, fn)
    assert declared.measures.strip() and declared.wrong.strip() and declared.title.strip()
    assert isinstance(declared.rehearsal, str)
    assert declared.config is None or isinstance(declared.config, ConfigSection)


def readme_stage_table() -> list[tuple[int, str, str]]:
    text = (ROOT / "docs" / "guide.md").read_text()
    start = text.index("| # | stage | on the rented node |")
    rows = []
    for line in text[start:].splitlines()[2:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows.append((int(cells[0]), cells[1], cells[2]))
    return rows


def test_the_guides_stage_table_says_what_the_registry_says():
    # Every row of the guide's table is a stage with its checklist row and title, in run order; a stage added
    # since (one new folder, nothing else touched) is listed by `suite run --list` until the guide names it.
    table = readme_stage_table()
    assert len(table) >= 19
    named = [n for n in stages.ORDER if n in {stage for _, stage, _ in table}]
    assert table == [(stages.CHECKLIST_ROW[n], n, stages.declaration(n).title) for n in named]


def test_loading_the_stages_does_not_import_torch():
    # The runner forks a child per stage; keeping torch out of the parent keeps `run --list` quick and the
    # fork free of torch's threads.
    code = "import sys, suite.stages as s\n[s.load(n) for n in s.available()]\nprint('torch' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"


def test_select_keeps_run_order_and_refuses_unknown_names():
    assert stages.select("profile,topology") == ["topology", "profile"]
    with pytest.raises(stages.StageSelectionError, match="unknown stage"):
        stages.select("topology,warp")
