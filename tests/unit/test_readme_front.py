"""The README's first screen is a quickstart: at most 40 lines before "## More", the three commands a renter
runs (each a real make target the Makefile defines), what each verdict means and what to do, and a sample of
the verdict that is what `make demo` really prints."""

from __future__ import annotations

import contextlib
import io
import re
import shlex
import subprocess
from pathlib import Path

from suite.__main__ import main as suite_main
from tests.readme_quickstart import quickstart_commands

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()


def test_the_first_screen_is_a_quickstart_of_at_most_40_lines():
    first = README[: README.index("## More")].splitlines()
    assert len(first) <= 40
    commands = quickstart_commands()
    assert [c.split()[:2] for c in commands] == [["make", "rehearse"], ["make", "plan"], ["make", "remote"]]
    for word in (
        "ACCEPT",
        "REJECT",
        "INCONCLUSIVE",
        "stage",
        "profile",
        "tier",
        "make test",
        "docs/guide.md",
    ):
        assert word in README[: README.index("## More") + 400], word
    for command in commands:  # each is a target make knows, its variables as written
        target = shlex.split(command)[1]
        assert re.search(rf"^{target}:", (ROOT / "Makefile").read_text(), re.M), target


def test_the_sample_verdict_is_what_make_demo_prints(tmp_path):
    printed = subprocess.run(
        ["make", "-n", "demo"], cwd=ROOT, capture_output=True, text=True, timeout=60, check=True
    )
    line = next(line for line in printed.stdout.splitlines() if " -m suite ingest " in line)
    argv = shlex.split(line.split(" || ")[0])[3:]  # after `.venv/bin/python -m suite`
    argv[argv.index("--out") + 1] = str(tmp_path)
    argv[argv.index("--record-last") + 1] = str(tmp_path / "LAST")
    with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
        assert suite_main(argv) == 3
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert suite_main(["check", (tmp_path / "LAST").read_text().strip()]) == 3
    sample = README[README.index("```\nto decide them:") :].split("```")[1].strip("\n").splitlines()
    printed_lines = out.getvalue().splitlines()
    assert len(sample) == 3 and all(line in printed_lines for line in sample), (sample, printed_lines)
