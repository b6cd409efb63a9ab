"""Profiles through a manifest and back: rebuilt generically from the dataclasses' fields, nested sections
included."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from dataclasses import dataclass, field

import pytest

from suite import stages
from suite.config import GLOO_CPU, NCCL_GPU, ConfigSection, Profile, ProfileError, profile_from_dict
from suite.fromjson import from_plain
from suite.sections import declare_sections, declared_sections
from suite.stages.fault import FaultConfig


def through_json(profile: Profile) -> Profile:
    return profile_from_dict(json.loads(json.dumps(profile.to_dict())))


def assert_no_json_leftovers(value, path="profile"):
    """Every nested value is a dataclass, tuple or scalar again: no dict or list left over from JSON."""
    assert not isinstance(value, (dict, list)), path
    if dataclasses.is_dataclass(value):
        for f in dataclasses.fields(value):
            assert_no_json_leftovers(getattr(value, f.name), f"{path}.{f.name}")
    elif isinstance(value, tuple):
        for i, v in enumerate(value):
            assert_no_json_leftovers(v, f"{path}[{i}]")


@pytest.mark.parametrize("profile", [GLOO_CPU, NCCL_GPU], ids=lambda p: p.name)
def test_both_profiles_round_trip_exactly(profile):
    back = through_json(profile)
    assert back == profile and hash(back) == hash(profile)
    assert_no_json_leftovers(back)
    for name in declared_sections():
        assert back.section(name) == profile.section(name)
        assert_no_json_leftovers(back.section(name), name)


def test_the_fault_section_comes_from_its_stage_module_and_survives_an_override():
    assert GLOO_CPU.section("fault") == stages.load("fault").CONFIG.values["gloo-cpu"]
    assert NCCL_GPU.section("fault").pg_timeout_s == 60.0 and GLOO_CPU.section("fault").ranks == 2
    changed = GLOO_CPU.with_overrides(fault=FaultConfig(ranks=2, steps=6, fault_step=3, scenarios=("hang",)))
    back = through_json(changed)
    assert back == changed and back.section("fault").scenarios == ("hang",) and back != GLOO_CPU
    # Overriding with the declared value is the profile itself (one form, so equality means equal values).
    assert GLOO_CPU.with_overrides(fault=GLOO_CPU.section("fault")) == GLOO_CPU


@dataclass(frozen=True, kw_only=True)
class Inner:
    depth: int = 1
    names: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class Outer:
    inner: Inner = field(default_factory=Inner)
    steps: tuple[tuple[str, float], ...] = ()
    port: int | None = None


def test_a_new_nested_sub_config_needs_no_hand_written_line(monkeypatch):
    saved = dict(declared_sections())
    owners = {name: m.CONFIG for name, m in stages.REGISTRY.modules.items() if m.CONFIG is not None}
    monkeypatch.setattr("suite.sections._SECTIONS", dict(saved))
    declare_sections(
        {
            **owners,
            "newstage": ConfigSection(
                "outer",
                Outer,
                {"nccl-gpu": Outer(inner=Inner(depth=3, names=("a", "b")), steps=(("x", 1.5),), port=29500)},
            ),
        }
    )
    try:
        assert NCCL_GPU.section("outer").inner.depth == 3 and GLOO_CPU.section("outer") == Outer()
        for profile in (GLOO_CPU, NCCL_GPU, NCCL_GPU.with_overrides(outer=Outer(inner=Inner(names=("z",))))):
            back = through_json(profile)
            assert back == profile and isinstance(back.section("outer").inner, Inner)
            assert_no_json_leftovers(back.section("outer"))
        assert from_plain(Outer, {"inner": {"depth": 2}, "steps": [["y", 2]], "port": None}) == Outer(
            inner=Inner(depth=2), steps=(("y", 2),)
        )
    finally:
        declare_sections(owners)


def test_two_stages_declaring_one_section_name_are_refused():
    owners = {name: m.CONFIG for name, m in stages.REGISTRY.modules.items() if m.CONFIG is not None}
    with pytest.raises(ProfileError, match="both declare config section 'fault'"):
        declare_sections({**owners, "other": ConfigSection("fault", Outer)})
    with pytest.raises(ProfileError, match="already a Profile field"):
        declare_sections({**owners, "other": ConfigSection("sweep", Outer)})
    assert declared_sections().keys() == {s.name for s in owners.values()}


def test_a_section_value_of_the_wrong_type_or_an_undeclared_section_is_refused():
    with pytest.raises(ProfileError, match="must be a FaultConfig"):
        GLOO_CPU.with_overrides(sections=(("fault", Outer()),))
    with pytest.raises(ProfileError, match="declared by no stage"):
        GLOO_CPU.with_overrides(sections=(("warp", Outer()),))
    with pytest.raises(ProfileError, match="no config section 'warp'"):
        GLOO_CPU.section("warp")


def test_unknown_recorded_keys_are_dropped_and_missing_ones_take_defaults():
    data = GLOO_CPU.to_dict()
    data["retired_field"] = 1
    data["sweep"]["retired_too"] = 2
    del data["sweep"]["dtype"], data["fault"]["concurrent"]
    back = profile_from_dict(json.loads(json.dumps(data)))
    assert (
        back.sweep.dtype == "float32"
        and back.section("fault").concurrent is False
        and back.nproc == GLOO_CPU.nproc
    )


def test_a_renamed_profile_keeps_its_section_values():
    renamed = NCCL_GPU.with_overrides(name="nccl-gpu-4x")
    assert renamed.section("fault") == NCCL_GPU.section("fault") and renamed.section("fault") != FaultConfig()
    assert through_json(renamed) == renamed


def test_a_profile_read_first_finds_every_section_without_importing_the_registry():
    # a process that never names suite.stages: the first reader of the table has the registry discovered
    code = (
        "import sys, json\n"
        "from suite.config import GLOO_CPU, profile_from_dict\n"
        "assert 'suite.stages' not in sys.modules\n"
        "data = GLOO_CPU.to_dict()\n"
        "print(json.dumps([sorted(data), profile_from_dict(data) == GLOO_CPU]))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    names, same = json.loads(done.stdout)
    assert {"fault", "pp", "burnin", "health"} <= set(names) and same


def test_a_stage_reads_its_own_section_typed_without_the_table():
    section = ConfigSection("drill", FaultConfig, {"gloo-cpu": FaultConfig(ranks=3)})
    assert GLOO_CPU.section(section) == FaultConfig(ranks=3) and NCCL_GPU.section(section) == FaultConfig()
    assert "drill" not in declared_sections()


def test_the_profiles_choices_are_literals_and_a_recorded_value_outside_them_is_refused():
    """backend, device, launcher and node_launcher name their choices in their type; a manifest's profile
    holding another (hand-edited, or from a cardtime that had more) is refused naming the field and the
    choices, never run with."""
    import typing

    from suite.fromjson import FieldTypeError

    hints = typing.get_type_hints(Profile)
    assert typing.get_args(hints["backend"]) == ("gloo", "nccl")
    assert typing.get_args(hints["device"]) == ("cpu", "cuda")
    assert typing.get_args(hints["launcher"]) == ("torchrun", "fork")
    assert typing.get_args(hints["node_launcher"]) == ("ssh", "srun")
    recorded = GLOO_CPU.to_dict() | {"backend": "mpi"}
    with pytest.raises(FieldTypeError, match=r"^Profile\.backend is 'mpi', not 'gloo' or 'nccl'$"):
        profile_from_dict(recorded)
    assert profile_from_dict(NCCL_GPU.to_dict()) == NCCL_GPU
