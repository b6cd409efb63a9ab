"""Every stage keeps the contract the runner relies on (docs/stages.md)."""

import subprocess
import sys

import pytest

from suite import stages


def test_every_checklist_stage_exists_in_order():
    assert stages.available() == list(stages.ORDER)
    assert [stages.CHECKLIST_ROW[name] for name in stages.ORDER] == [1, 2, 3, 4, 5, 7, 8, 6, 9, 10]


@pytest.mark.parametrize("name", stages.ORDER)
def test_stage_has_the_three_functions_and_its_words(name):
    module = stages.load(name)
    for fn in ("expect", "run", "judge"):
        assert callable(getattr(module, fn))
    assert module.MEASURES.strip() and module.WRONG.strip()
    assert isinstance(module.REHEARSAL, str)


def test_loading_the_stages_does_not_import_torch():
    # The runner forks a child per stage; keeping torch out of the parent keeps `run --list` quick and the
    # fork free of torch's threads.
    code = ("import sys, suite.stages as s\n"
            "[s.load(n) for n in s.available()]\n"
            "print('torch' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"


def test_select_keeps_run_order_and_refuses_unknown_names():
    assert stages.select("profile,topology") == ["topology", "profile"]
    with pytest.raises(stages.StageSelectionError, match="unknown stage"):
        stages.select("topology,warp")
