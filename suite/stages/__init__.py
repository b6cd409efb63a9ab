"""The stages, discovered from this package and run in the order their modules declare.
Each stage is one folder (suite/stages/<name>/); "_" modules are libraries stages share; multi-node: suite.cluster.
Imported by the runner, the commands, suite.plan, suite.ingest and reports; a stage imports no other stage.

A stage is one folder here (every package not starting with "_"); the runner, `make plan`, the
profile's config sections and the report learn everything about it from the module itself
(see docs/stages.md):

    ROW: int             its row in CHECKLIST.md (unique; the report cites it)
    AFTER: tuple[str]    the stages it runs after (their facts, or the checklist's grouping); () = none
    BEFORE: tuple[str]   optional: stages it must run before (a stage that runs first says so itself)
    TITLE: str           what it runs on the rented node, in a few words (the README's stage table)
    MEASURES: str        one sentence: what the stage measures
    WRONG: str           one sentence: what wrong looks like (CHECKLIST.md's verdict column)
    REHEARSAL: str       what its gloo-cpu face does ("" when it has none: skipped on CPU)
    CONFIG: ConfigSection | None   its own part of the profile, with a value per profile (suite/config.py)
    PROFILES: tuple[str]  optional: the profiles that run it (default DEFAULT_PROFILES, the multi-card ones)
    CPU_SKIP: str        optional, for REHEARSAL = "": why the CPU rehearsal skips it (the skip verdict's reason)
    def estimate(p: suite.plan.hours.PlanInputs) -> tuple[float, str]   seconds on the GPU profile, and how
    def expect(profile, facts) -> list[Expectation]
    def run(profile, ctx) -> list[Row]
    def judge(rows, expectations, facts) -> list[Verdict]

The run order is every AFTER and BEFORE satisfied, ties broken by ROW. A module that misdeclares (an
unknown stage in AFTER or BEFORE, a ROW another stage has, a missing attribute, a cycle) fails the
import of this package with a message naming the module.
"""

from __future__ import annotations

import heapq
import importlib
import pkgutil
from dataclasses import dataclass
from types import ModuleType

from suite import config
from suite import sections

DEFAULT_PROFILES = ("gloo-cpu", "nccl-gpu")
"""The profiles a stage runs on when its module declares no PROFILES: the rehearsal and the multi-card box.
A stage that means something on one card (nccl-1gpu) says so itself: `PROFILES = (*DEFAULT_PROFILES, "nccl-1gpu")`."""

REQUIRED = ("ROW", "AFTER", "TITLE", "MEASURES", "WRONG", "REHEARSAL", "CONFIG", "estimate", "expect", "run", "judge")


class StageDeclarationError(RuntimeError):
    """A stage module whose declarations cannot be placed in the registry; the message names the module."""


class StageSelectionError(ValueError):
    """A --stages list naming something that is not a stage."""


@dataclass(frozen=True)
class Registry:
    """Every stage module of the package, in run order."""

    modules: dict[str, ModuleType]
    """Stage name → module, in run order."""

    @property
    def order(self) -> tuple[str, ...]:
        return tuple(self.modules)

    @property
    def rows(self) -> dict[str, int]:
        return {name: module.ROW for name, module in self.modules.items()}


def stage_module_names(package: ModuleType) -> list[str]:
    return sorted(m.name for m in pkgutil.iter_modules(package.__path__) if not m.name.startswith("_"))


def check_declarations(module: ModuleType) -> None:
    where = f"stage module {module.__name__} ({module.__file__})"
    missing = [attr for attr in REQUIRED if not hasattr(module, attr)]
    if missing:
        raise StageDeclarationError(f"{where} lacks {', '.join(missing)}: declare them (see docs/stages.md)")
    if not isinstance(module.ROW, int) or isinstance(module.ROW, bool) or module.ROW < 1:
        raise StageDeclarationError(f"{where}: ROW = {module.ROW!r} must be its CHECKLIST.md row, an integer ≥ 1")
    for attr in ("AFTER", "BEFORE"):
        names = getattr(module, attr, ())
        if isinstance(names, str) or not isinstance(names, (tuple, list)) or not all(isinstance(a, str) for a in names):
            raise StageDeclarationError(f"{where}: {attr} = {names!r} must be a tuple of stage names")
    for text in ("TITLE", "MEASURES", "WRONG"):
        if not isinstance(getattr(module, text), str) or not getattr(module, text).strip():
            raise StageDeclarationError(f"{where}: {text} must be a non-empty sentence")
    names = getattr(module, "PROFILES", DEFAULT_PROFILES)
    if isinstance(names, str) or not isinstance(names, (tuple, list)) or not names:
        raise StageDeclarationError(f"{where}: PROFILES = {names!r} must be a non-empty tuple of profile names")
    unknown = [n for n in names if n not in config.PROFILES]
    if unknown:
        raise StageDeclarationError(f"{where}: PROFILES names {', '.join(map(repr, unknown))}, which is no profile: "
                                    f"choose from {', '.join(config.PROFILES)}")
    if module.CONFIG is not None and not isinstance(module.CONFIG, sections.ConfigSection):
        raise StageDeclarationError(f"{where}: CONFIG must be a suite.sections.ConfigSection or None")


def run_order(modules: dict[str, ModuleType]) -> list[str]:
    """Every AFTER before its stage; among the stages free to run next, the lowest ROW first."""
    by_row: dict[int, str] = {}
    for name, module in modules.items():
        if module.ROW in by_row:
            raise StageDeclarationError(f"stage module {module.__name__} declares ROW = {module.ROW}, which stage "
                                        f"{by_row[module.ROW]} already has: each checklist row belongs to one stage")
        by_row[module.ROW] = name
        for attr in ("AFTER", "BEFORE"):
            unknown = [a for a in getattr(module, attr, ()) if a not in modules or a == name]
            if unknown:
                raise StageDeclarationError(f"stage module {module.__name__} runs {attr} {', '.join(unknown)}, which "
                                            f"is no other stage: choose from {', '.join(sorted(set(modules) - {name}))}")
    waiting = {name: set(m.AFTER) for name, m in modules.items()}
    for name, module in modules.items():
        for later in getattr(module, "BEFORE", ()):
            waiting[later].add(name)
    ready = [(modules[name].ROW, name) for name, needs in waiting.items() if not needs]
    heapq.heapify(ready)
    order: list[str] = []
    while ready:
        _, name = heapq.heappop(ready)
        order.append(name)
        for other, needs in waiting.items():
            if name in needs:
                needs.discard(name)
                if not needs:
                    heapq.heappush(ready, (modules[other].ROW, other))
    stuck = [modules[n].__name__ for n in modules if n not in order]
    if stuck:
        raise StageDeclarationError(f"stage modules {', '.join(stuck)} wait on each other through AFTER (a cycle): "
                                    f"break it")
    return order


def discover(package: ModuleType) -> Registry:
    """Import every stage module of `package`, check its declarations, order them, declare their config sections."""
    modules = {}
    for name in stage_module_names(package):
        module = importlib.import_module(f"{package.__name__}.{name}")
        check_declarations(module)
        modules[name] = module
    registry = Registry({name: modules[name] for name in run_order(modules)})
    try:
        sections.declare_sections({name: m.CONFIG for name, m in registry.modules.items() if m.CONFIG is not None})
    except config.ProfileError as e:
        raise StageDeclarationError(str(e)) from None
    return registry


def rediscover() -> Registry:
    """Discover the package again (after a module was added to its __path__); ORDER and CHECKLIST_ROW follow."""
    global REGISTRY, ORDER, CHECKLIST_ROW
    REGISTRY = discover(importlib.import_module(__name__))
    ORDER, CHECKLIST_ROW = REGISTRY.order, REGISTRY.rows
    return REGISTRY


def profiles_of(module: ModuleType) -> tuple[str, ...]:
    """The profiles that run this stage (its PROFILES, else DEFAULT_PROFILES)."""
    return tuple(getattr(module, "PROFILES", DEFAULT_PROFILES))


def runs_on(name: str, profile: str | None) -> bool:
    """Whether stage `name` belongs to profile `profile`; a profile the suite does not define (a test's, a
    renamed one) and None run every stage."""
    return profile is None or profile not in config.PROFILES or profile in profiles_of(REGISTRY.modules[name])


def available(profile: str | None = None) -> list[str]:
    """Every stage (of `profile`, when given), in run order."""
    return [name for name in REGISTRY.order if runs_on(name, profile)]


def load(name: str) -> ModuleType:
    try:
        return REGISTRY.modules[name]
    except KeyError:
        raise StageSelectionError(f"no stage {name!r}: choose from {', '.join(REGISTRY.order)}") from None


def select(spec: str | None, profile: str | None = None) -> list[str]:
    """The stages named in a comma-separated --stages value (all of `profile`'s when empty), in run order."""
    stages = available(profile)
    if not spec:
        return stages
    wanted = [s.strip() for s in spec.split(",") if s.strip()]
    if not wanted:  # ",," names no stage: a run of nothing would pass vacuously
        raise StageSelectionError(f"--stages {spec!r} names no stage: choose from {', '.join(stages)}")
    unknown = [s for s in wanted if s not in REGISTRY.order]
    if unknown:
        raise StageSelectionError(f"unknown stage(s) {', '.join(unknown)}: choose from {', '.join(stages)}")
    elsewhere = [s for s in wanted if s not in stages]
    if elsewhere:
        raise StageSelectionError(f"stage(s) {', '.join(elsewhere)} do not run on profile {profile}: choose from "
                                  f"{', '.join(stages)}")
    return [s for s in stages if s in wanted]


REGISTRY: Registry
ORDER: tuple[str, ...]
"""The run order (derived from the modules' AFTER and ROW)."""
CHECKLIST_ROW: dict[str, int]
"""Each stage's CHECKLIST.md row, as the report cites it (the modules' ROW)."""
rediscover()


TEXTS = ("TITLE", "MEASURES", "WRONG", "REHEARSAL")
"""What a stage says about itself, recorded in the manifest when a run is made (the report of an old run
shows what that run's code said, not today's)."""


def texts(names: list[str]) -> dict[str, dict[str, str]]:
    """{stage: {"title": …, "measures": …, "wrong": …, "rehearsal": …}} for the stages a run selected."""
    return {name: {attr.lower(): str(getattr(load(name), attr, "")) for attr in TEXTS} for name in names}
