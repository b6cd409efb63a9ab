"""The README quickstart's commands, as a reader copies them: the tests that run them read them from here."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"
# The example box the README addresses; a test puts its own loopback box in its place.
EXAMPLE_HOST = "root@203.0.113.7:2222"


def quickstart_commands() -> list[str]:
    """Each `make …` line of the quickstart's code block, without its comment: rehearse, plan, remote."""
    text = README.read_text()
    first_screen = text[: text.index("## More")]
    return re.findall(r"^(make \w+[^#\n]*?)\s*#", first_screen, re.M)


def without_make(env: dict[str, str]) -> dict[str, str]:
    """`env` as a user's shell has it, not as an outer `make test` hands it to its children (MAKEFLAGS,
    MAKELEVEL…: a make started under them prints "Entering directory" lines a user never sees)."""
    return {k: v for k, v in env.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS", "MAKEOVERRIDES")}
