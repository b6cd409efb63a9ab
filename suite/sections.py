"""The profile's config sections a stage module declares (`CONFIG = ConfigSection(...)`), and the table of
them.

A stage reads its own section as `profile.section(CONFIG)`, typed by the section's dataclass, with no table at
all. The table (every stage's section, by name) serves what needs them all: a profile's manifest form and its
round trip, overrides by name. The stage registry (suite.stages) fills it as it discovers the stage folders,
and the first reader that finds it empty has the registry discovered then (by name: the registry imports
suite/config.py, which imports this module, so neither may import the registry itself).
"""

from __future__ import annotations

import dataclasses
import importlib
import typing
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Generic, TypeVar

T = TypeVar("T")


class ProfileError(ValueError):
    """A profile that cannot run; the message names what to change."""


@dataclass(frozen=True)
class ConfigSection(Generic[T]):
    """A stage's own part of the profile, declared by its module: `CONFIG = ConfigSection("drill",
    DrillConfig, {"gloo-cpu": DrillConfig(ranks=2), "nccl-gpu": DrillConfig()})`. The stage reads it as
    `profile.section(CONFIG)`; a profile not named in `values` gets the dataclass's defaults."""

    name: str
    """The attribute on Profile (and the key in the manifest's profile)."""
    type: type[T]
    """A frozen dataclass."""
    values: typing.Mapping[str, T] = field(default_factory=dict)
    """Profile name → the section's value on that profile."""

    def __post_init__(self) -> None:
        if not dataclasses.is_dataclass(self.type):
            raise ProfileError(f"config section {self.name!r}: {self.type!r} is not a dataclass")
        wrong = [p for p, v in self.values.items() if not isinstance(v, self.type)]
        if wrong:
            raise ProfileError(
                f"config section {self.name!r}: the values for {', '.join(wrong)} are not "
                f"{self.type.__name__} instances"
            )

    def value_for(self, profile_name: str) -> T:
        return self.values[profile_name] if profile_name in self.values else self.type()


_SECTIONS: dict[str, ConfigSection] = {}
"""The config sections the stage modules declare (suite.stages fills it at discovery), by name."""
_DECLARED = False
RESERVED: set[str] = set()
"""Names a section may not take: Profile's fields (suite/config.py adds them)."""


def _sections() -> dict[str, ConfigSection]:
    """The declared sections, the stage registry discovered first if nothing has yet."""
    if not _DECLARED:
        importlib.import_module("suite.stages")
    if not _DECLARED:
        raise ProfileError(
            "the config sections were read while the stage registry was being discovered: a stage "
            "module read a profile's sections at import time"
        )
    return _SECTIONS


def declare_sections(sections: dict[str, ConfigSection]) -> None:
    """Replace the declared sections (stage name → its section); a name another stage or Profile holds is
    refused."""
    fields = RESERVED
    owners: dict[str, str] = {}
    for stage, section in sections.items():
        if section.name in fields:
            raise ProfileError(
                f"stage {stage}'s config section {section.name!r} is already a Profile field: rename it"
            )
        if section.name in owners:
            raise ProfileError(
                f"stages {owners[section.name]} and {stage} both declare config section "
                f"{section.name!r}: rename one"
            )
        owners[section.name] = stage
    global _DECLARED
    _SECTIONS.clear()
    _SECTIONS.update({s.name: s for s in sections.values()})
    _DECLARED = True


def declared_sections() -> typing.Mapping[str, ConfigSection]:
    """Every declared section by name, read-only: a view, not a copy (Profile reads it on every to_dict)."""
    return MappingProxyType(_sections())
