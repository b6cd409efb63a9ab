"""The stages, discovered from this package and run in the checklist's order.

A stage is a module here with three functions and a few plain attributes; the runner knows
nothing else about it (see docs/stages.md):

    MEASURES: str        one sentence: what the stage measures
    WRONG: str           one sentence: what wrong looks like (CHECKLIST.md's verdict column)
    REHEARSAL: str       what its gloo-cpu face does ("" when it has none: skipped on CPU)
    def expect(profile, facts) -> list[Expectation]
    def run(profile, ctx) -> list[Row]
    def judge(rows, expectations, facts) -> list[Verdict]
"""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType

# The checklist's run order: rows 1, 2, 3, 4, 5, 7, 8, 6, 9, 10 (the scaling experiments run together before overlap).
ORDER: tuple[str, ...] = (
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
)

# The checklist's own row number of each stage, as the report cites it.
CHECKLIST_ROW = {name: n for name, n in zip(ORDER, (1, 2, 3, 4, 5, 7, 8, 6, 9, 10))}

REQUIRED = ("expect", "run", "judge", "MEASURES", "WRONG", "REHEARSAL")


class StageSelectionError(ValueError):
    """A --stages list naming something that is not a stage."""


def available() -> list[str]:
    """Stage modules present in this package, in run order."""
    present = {m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_")}
    unknown = present - set(ORDER)
    if unknown:
        raise RuntimeError(f"stage modules {sorted(unknown)} are not in ORDER: add them in the checklist's order")
    return [name for name in ORDER if name in present]


def load(name: str) -> ModuleType:
    module = importlib.import_module(f"{__name__}.{name}")
    missing = [attr for attr in REQUIRED if not hasattr(module, attr)]
    if missing:
        raise RuntimeError(f"stage {name} lacks {', '.join(missing)}")
    return module


def select(spec: str | None) -> list[str]:
    """The stages named in a comma-separated --stages value (all when empty), in run order."""
    stages = available()
    if not spec:
        return stages
    wanted = [s.strip() for s in spec.split(",") if s.strip()]
    unknown = [s for s in wanted if s not in stages]
    if unknown:
        raise StageSelectionError(f"unknown stage(s) {', '.join(unknown)}: choose from {', '.join(stages)}")
    return [s for s in stages if s in wanted]
