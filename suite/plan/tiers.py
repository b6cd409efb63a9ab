"""Time-boxed tiers of a run: which stages, how long the burn-in, and every stage's hard timeout.

    python -m suite run --profile nccl-gpu --tier quick        # health, topology, bandwidth, a 2-minute
                                                               # burn-in
    python -m suite run --profile nccl-gpu --tier standard     # the whole checklist and a 10-minute burn-in
    BURNIN_MIN=240 python -m suite run --tier soak             # health, topology and a 4-hour burn-in
                                                               # (default 1 h)
    python -m suite run --recheck runs/<run-id>                # only what failed there, on the repaired box
    make plan TIER=quick                                       # each tier's minutes before renting

A tier only chooses; the stages and their code are the same in every tier. Its burn-in length is the burnin
stage's `seconds` (profile.section("burnin")), and that stage's timeout grows with it (its own length plus
TIMEOUT_MARGIN_S), so every stage keeps a hard limit however long the soak. The CPU rehearsal keeps its own
short burn-in: a tier there chooses the stages only.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path

from suite import env_settings

TIMEOUT_MARGIN_S = 300.0
"""The burn-in's timeout beyond its own length: the launch, the seeded inputs, the last repeat, the
sampler."""


@dataclass(frozen=True)
class Tier:
    name: str
    stages: tuple[str, ...] | None
    """The stages it runs (in the registry's order); None: every stage of the profile."""
    burnin_min: float
    says: str


TIERS = {
    "quick": Tier(
        "quick",
        ("health", "topology", "bandwidth", "burnin"),
        2.0,
        "≤ 10 min of card time on 8×H100: is the box the one paid for, its links, a 2-minute burn-in",
    ),
    "standard": Tier("standard", None, 10.0, "the whole checklist and a 10-minute burn-in"),
    "soak": Tier(
        "soak",
        ("health", "topology", "burnin"),
        60.0,
        "an hour's burn-in (BURNIN_MIN= for another length) after health and topology",
    ),
}


class TierError(ValueError):
    pass


def burnin_minutes(tier: Tier, environ=os.environ) -> float:
    """The tier's burn-in minutes; BURNIN_MIN overrides any tier's (a finite number above 0, at most a
    week)."""
    text = environ.get("BURNIN_MIN", "").strip()
    if not text:
        return tier.burnin_min
    try:
        return env_settings.minutes(text)
    except env_settings.SettingError as e:
        raise TierError(str(e)) from None


def get_tier(name: str) -> Tier:
    if name not in TIERS:
        raise TierError(f"tier {name!r} is not one of {', '.join(TIERS)}")
    return TIERS[name]


def apply(profile, name: str, environ=os.environ):
    """(the profile with the tier's burn-in and its timeout, the tier's stages available on that profile)."""
    from suite import stages

    tier = get_tier(name)
    chosen = [s for s in stages.available(profile.name) if tier.stages is None or s in tier.stages]
    if profile.is_rehearsal or "burnin" not in chosen:
        return profile, chosen
    seconds = 60.0 * burnin_minutes(tier, environ)
    timeouts = dict(profile.stage_timeouts_s)
    timeouts["burnin"] = seconds + TIMEOUT_MARGIN_S
    return profile.with_overrides(
        burnin=dataclasses.replace(profile.section("burnin"), seconds=seconds),
        stage_timeouts_s=tuple(sorted(timeouts.items())),
    ), chosen


def failed_stages(run_dir: Path) -> list[str]:
    """The stages of a finished run with a `fail` verdict or that did not complete: what `--recheck`
    reruns."""
    from suite import verdicts
    from suite.results import RunDir

    run = RunDir.load(Path(run_dir))
    failed = verdicts.failed_stages(run.manifest, run.verdicts(), unfinished=True)
    selected = run.manifest.get("stages_selected") or sorted(failed)
    return [s for s in selected if s in failed]


QUICK_GOAL_S = 600.0
"""The quick tier's promise: at most 10 minutes of stages on 8×H100."""


def tier_line(name: str, stages_s: float) -> str:
    """The plan's line for a tier: what it runs and, for quick, whether it keeps its 10-minute promise."""
    tier = get_tier(name)
    line = f"tier {name}: {tier.says}; stages {stages_s / 60:.1f} min"
    if name == "quick":
        line += (
            f" (within its {QUICK_GOAL_S / 60:g}-minute goal)"
            if stages_s <= QUICK_GOAL_S
            else f" (OVER its {QUICK_GOAL_S / 60:g}-minute goal)"
        )
    return line
