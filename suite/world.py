"""How many processes a run on a counted host starts: the one rule `make plan HOST=` and `make remote` share.

A GPU profile runs one process per GPU the host lists (`nvidia-smi -L`, counted by preflight on every node);
NPROC= chooses fewer, never more. The scaling stages' degrees are then the powers of two that fit those
processes (suite.config.get_profile keeps the profile's degrees up to nproc; each stage's own degree function
does the same for PP, CP, EP). One function builds the profile for both, so a plan cannot promise what the
run will not do: the plan of a 4-GPU box and the run on it see the same profile.

No torch here: provisioning imports this on the laptop.
"""

from __future__ import annotations

from suite.config import NCCL_1GPU, Profile, ProfileError, get_profile


def run_nproc(profile_name: str, gpus: int, asked: int = 0) -> int | None:
    """The --nproc of a run of `profile_name` on a host listing `gpus` GPUs per node (NPROC=`asked`, 0:
    unset); None: the profile's own (a CPU profile's, nccl-1gpu's single process)."""
    profile = get_profile(profile_name)
    if asked < 0:
        raise ProfileError(f"NPROC={asked}: a number of processes per node is at least 1")
    if profile.device != "cuda":
        return asked or None
    if profile.name == NCCL_1GPU.name:
        if asked not in (0, 1):
            raise ProfileError(
                f"NPROC={asked} with PROFILE={profile.name}: that profile is one process on one card; "
                f"use PROFILE=nccl-gpu NPROC={asked}"
            )
        return None
    if gpus < 1:
        raise ProfileError(
            f"PROFILE={profile.name} needs a GPU and the host lists none (nvidia-smi -L): "
            "fix the driver, or run the CPU rehearsal (PROFILE=gloo-cpu)"
        )
    if asked > gpus:
        raise ProfileError(
            f"NPROC={asked} but the host lists {gpus} GPU(s) per node: one process per GPU, "
            f"so NPROC={gpus} at most (or leave NPROC= unset)"
        )
    return asked or gpus


def host_profile(profile_name: str, gpus: int, asked: int = 0) -> Profile:
    """The profile a run of `profile_name` uses on a host listing `gpus` GPUs per node, NPROC=`asked`."""
    return get_profile(profile_name, run_nproc(profile_name, gpus, asked))


def nproc_args(profile_name: str, gpus: int, asked: int = 0) -> list[str]:
    """`python -m suite run`'s --nproc for that host ([] where the profile's own is the one)."""
    nproc = run_nproc(profile_name, gpus, asked)
    return [] if nproc is None else ["--nproc", str(nproc)]
