"""What a stage declares: one `Stage(...)`, the last statement of its folder's __init__.py (nccl-tests'
`struct testColl`, in Python). The registry (suite/stages/__init__.py) reads nothing else of a stage, and a
declaration of the wrong type fails at construction, naming the field. Imported by every stage and by the
registry.

    STAGE = Stage(row=5, after=("baseline",), title="…", measures="…", wrong="…", rehearsal="…",
    config=CONFIG,
                  estimate=estimate, expect=expect, run=run, judge=judge, headline=headline)
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Callable

from suite import config
from suite.sections import ConfigSection

DEFAULT_PROFILES = ("gloo-cpu", "nccl-gpu")
"""The profiles a stage runs on unless it says otherwise: the rehearsal and the multi-card box. A stage that
means something on one card (nccl-1gpu) says so itself: `profiles=(*DEFAULT_PROFILES, "nccl-1gpu")`."""


class StageDeclarationError(RuntimeError):
    """A stage whose declaration cannot be placed in the registry; the message names the stage and the
    field."""


@dataclass(frozen=True, kw_only=True)
class Stage:
    row: int
    """Its row in CHECKLIST.md (unique; the report cites it as "checklist #row")."""
    title: str
    """What it runs on the rented node, in a few words (the stage table in docs/guide.md)."""
    measures: str
    """One sentence: what the stage measures."""
    wrong: str
    """One sentence: what wrong looks like (CHECKLIST.md's verdict column)."""
    rehearsal: str
    """What its gloo-cpu face does; "" when it has none (skipped on CPU, with cpu_skip as the reason)."""
    config: ConfigSection | None
    """Its own part of the profile, a value per profile; None when it has none."""
    estimate: Callable[[Any], tuple[float, str]]
    """`make plan`: (seconds on the GPU profile, how), from suite.plan.hours.PlanInputs."""
    expect: Callable[[Any, Any], list]
    """(profile, facts) -> [Expectation]: predicted before the stage runs (facts: suite.facts.Facts)."""
    run: Callable[[Any, Any], list]
    """(profile, StageContext) -> [Row]: runs in a forked child; its raw output under raw/<stage>/."""
    judge: Callable[[list, list, Any], list]
    """(rows, expectations, facts) -> [Verdict]: pure. facts: suite.facts.Facts, the run's typed profile
    (`facts.profile`) and what the stages published, this one's included."""
    after: tuple[str, ...] = ()
    """The stages it runs after (their facts, or the checklist's grouping)."""
    before: tuple[str, ...] = ()
    """Stages it must run before (a stage that runs first says so itself)."""
    profiles: tuple[str, ...] = DEFAULT_PROFILES
    """The profiles that run it."""
    cpu_skip: str = ""
    """With rehearsal="": why the CPU rehearsal skips it (the skip verdict's reason)."""
    headline: Callable[[list, list, list], str | None] | None = None
    """(rows, verdicts, expectations) -> the report's one line for the stage, or None (suite/headlines.py)."""
    version: str = ""
    """What `reports compare` holds runs to (suite/stagecode.py): "" is the hash of the stage's folder; set it
    when a shared library's change alters what the stage measures."""

    def __post_init__(self) -> None:
        for f in fields(self):
            problem = _field_problem(f.name, getattr(self, f.name))
            if problem:
                raise StageDeclarationError(f"Stage(row={self.row!r}, title={self.title!r}): {problem}")


_TEXTS = ("title", "measures", "wrong")
_CALLS = ("estimate", "expect", "run", "judge")
_NAMES = ("after", "before", "profiles")


def _field_problem(name: str, value: Any) -> str | None:
    if name == "row" and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
        return f"row={value!r} must be its CHECKLIST.md row, an integer ≥ 1"
    if name in _TEXTS and (not isinstance(value, str) or not value.strip()):
        return f"{name}={value!r} must be a non-empty sentence"
    if name in ("rehearsal", "cpu_skip", "version") and not isinstance(value, str):
        return f"{name}={value!r} must be a string ('' for none)"
    if name in _CALLS and not callable(value):
        return f"{name}={value!r} must be a function"
    if name == "headline" and value is not None and not callable(value):
        return f"headline={value!r} must be a function or None"
    if name == "config" and value is not None and not isinstance(value, ConfigSection):
        return f"config={value!r} must be a suite.sections.ConfigSection or None"
    if name in _NAMES:
        if not isinstance(value, tuple) or not all(isinstance(v, str) for v in value):
            return f"{name}={value!r} must be a tuple of names"
        if name == "profiles":
            unknown = [v for v in value if v not in config.PROFILES]
            if not value or unknown:
                return (
                    f"profiles={value!r} must name at least one profile, each one of "
                    f"{', '.join(config.PROFILES)}"
                )
    return None
