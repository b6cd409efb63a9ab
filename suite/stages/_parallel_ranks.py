"""The stages that split work in powers of two (zero, pp, cp, ep, overlap, profile) on a box whose GPU count
is not one.

A run's world is every GPU `nvidia-smi -L` lists (suite/world.py); these stages run on Profile.parallel_ranks,
the largest power of two within it (6 GPUs: ranks 0–3), and say so in an expectation and in their progress
line, so a 6-GPU report shows EP = 4 with why, never a refusal or a skip of the whole stage.
"""

from __future__ import annotations

from suite.config import Profile
from suite.results import Expectation


def subset_expectations(stage: str, profile: Profile, what: str) -> list[Expectation]:
    """One expectation naming the ranks the stage runs on, where that is fewer than the run's; none
    otherwise."""
    n, used = profile.nproc, profile.parallel_ranks
    if used == n:
        return []
    return [
        Expectation(
            stage=stage,
            case="ranks",
            metric="parallel_ranks",
            value=used,
            unit="count",
            world=used,
            basis=f"{n} ranks, one per GPU: {what} splits its work in powers of two, so it runs on "
            f"ranks 0–{used - 1} (the largest power of two ≤ {n}) while ranks {used}–{n - 1} wait",
        )
    ]


def subset_note(profile: Profile) -> str:
    """' on 4 of the 6 ranks (the largest power of two)' for a progress line; '' when every rank takes
    part."""
    n, used = profile.nproc, profile.parallel_ranks
    return "" if used == n else f" on {used} of the {n} ranks (the largest power of two)"
