"""The stages, discovered from this package and run in the order their declarations say.
Each stage is one folder (suite/stages/<name>/) ending in one STAGE = Stage(...) (suite/stage_contract.py);
imported by the runner, the commands, suite.plan, suite.ingest and reports; a stage imports no other stage.

A stage is one folder here (every package not starting with "_"; "_" modules are libraries stages share); the
runner, `make plan`, the profile's config sections and the report learn everything about it from its typed
declaration, and nothing else (see docs/stages.md):

    STAGE = Stage(row=5, after=("baseline",), title=…, measures=…, wrong=…, rehearsal=…, config=CONFIG,
                  estimate=estimate, expect=expect, run=run, judge=judge, headline=headline)

The run order is every `after` and `before` satisfied, ties broken by row. A folder that misdeclares (no
STAGE, a field of the wrong type, an unknown stage in after or before, a row another stage has, a cycle) fails
the import of this package with a message naming the module.
"""

from __future__ import annotations

import heapq
import importlib
import pkgutil
from dataclasses import dataclass
from types import ModuleType

from suite import config, sections

# named from here too
from suite.stage_contract import Stage, StageDeclarationError


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
    def declared(self) -> dict[str, Stage]:
        """Stage name → its declaration, in run order."""
        return {name: module.STAGE for name, module in self.modules.items()}

    @property
    def rows(self) -> dict[str, int]:
        return {name: stage.row for name, stage in self.declared.items()}


def stage_module_names(package: ModuleType) -> list[str]:
    return sorted(m.name for m in pkgutil.iter_modules(package.__path__) if not m.name.startswith("_"))


def check_declaration(module: ModuleType) -> None:
    """The folder declares one Stage; its fields were checked when it was built (suite/stage_contract.py)."""
    declared = getattr(module, "STAGE", None)
    if not isinstance(declared, Stage):
        raise StageDeclarationError(
            f"stage module {module.__name__} ({module.__file__}) declares no STAGE = "
            f"Stage(...) (it has {type(declared).__name__}): see docs/stages.md"
        )


def run_order(modules: dict[str, ModuleType]) -> list[str]:
    """Every `after` before its stage; among the stages free to run next, the lowest row first."""
    by_row: dict[int, str] = {}
    declared = {name: module.STAGE for name, module in modules.items()}
    for name, module in modules.items():
        stage = declared[name]
        if stage.row in by_row:
            raise StageDeclarationError(
                f"stage module {module.__name__} declares row={stage.row}, which stage "
                f"{by_row[stage.row]} already has: each checklist row belongs to one stage"
            )
        by_row[stage.row] = name
        for attr in ("after", "before"):
            unknown = [a for a in getattr(stage, attr) if a not in modules or a == name]
            if unknown:
                raise StageDeclarationError(
                    f"stage module {module.__name__} runs {attr} {', '.join(unknown)}, which "
                    f"is no other stage: choose from {', '.join(sorted(set(modules) - {name}))}"
                )
    waiting = {name: set(stage.after) for name, stage in declared.items()}
    for name, stage in declared.items():
        for later in stage.before:
            waiting[later].add(name)
    ready = [(declared[name].row, name) for name, needs in waiting.items() if not needs]
    heapq.heapify(ready)
    order: list[str] = []
    while ready:
        _, name = heapq.heappop(ready)
        order.append(name)
        for other, needs in waiting.items():
            if name in needs:
                needs.discard(name)
                if not needs:
                    heapq.heappush(ready, (declared[other].row, other))
    stuck = [modules[n].__name__ for n in modules if n not in order]
    if stuck:
        raise StageDeclarationError(
            f"stage modules {', '.join(stuck)} wait on each other through after (a cycle): break it"
        )
    return order


def discover(package: ModuleType) -> Registry:
    """Import every stage module of `package`, check its declarations, order them, declare their config
    sections."""
    modules = {}
    for name in stage_module_names(package):
        try:
            module = importlib.import_module(f"{package.__name__}.{name}")
        except StageDeclarationError as e:  # a field of the wrong type, caught as its Stage(...) was built
            raise StageDeclarationError(f"stage module {package.__name__}.{name}: {e}") from None
        check_declaration(module)
        modules[name] = module
    registry = Registry({name: modules[name] for name in run_order(modules)})
    try:
        sections.declare_sections(
            {name: d.config for name, d in registry.declared.items() if d.config is not None}
        )
    except config.ProfileError as e:
        raise StageDeclarationError(str(e)) from None
    return registry


def rediscover() -> Registry:
    """Discover the package again (after a module was added to its __path__); ORDER and CHECKLIST_ROW
    follow."""
    global REGISTRY, ORDER, CHECKLIST_ROW
    REGISTRY = discover(importlib.import_module(__name__))
    ORDER, CHECKLIST_ROW = REGISTRY.order, REGISTRY.rows
    return REGISTRY


def declaration(name: str) -> Stage:
    """The stage's typed declaration (StageSelectionError for a name that is no stage)."""
    return load(name).STAGE


def runs_on(name: str, profile: str | None) -> bool:
    """Whether stage `name` belongs to profile `profile`; a profile the suite does not define (a test's, a
    renamed one) and None run every stage."""
    return (
        profile is None or profile not in config.PROFILES or profile in REGISTRY.modules[name].STAGE.profiles
    )


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
        raise StageSelectionError(
            f"stage(s) {', '.join(elsewhere)} do not run on profile {profile}: choose from "
            f"{', '.join(stages)}"
        )
    return [s for s in stages if s in wanted]


REGISTRY: Registry
ORDER: tuple[str, ...]
"""The run order (derived from the declarations' after, before and row)."""
CHECKLIST_ROW: dict[str, int]
"""Each stage's CHECKLIST.md row, as the report cites it (the declarations' row)."""
rediscover()


TEXTS = ("title", "measures", "wrong", "rehearsal")
"""What a stage says about itself, recorded in the manifest when a run is made (the report of an old run
shows what that run's code said, not today's)."""


def texts(names: list[str]) -> dict[str, dict[str, str]]:
    """{stage: {"title": …, "measures": …, "wrong": …, "rehearsal": …}} for the stages a run selected."""
    return {name: {attr: getattr(declaration(name), attr) for attr in TEXTS} for name in names}
