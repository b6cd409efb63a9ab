"""make remote's options: what the laptop was asked (the host and how to log in, the run, its archive), and
the checks of PROFILE= and STAGES= against the suite made before any SSH."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from provisioning.session.hosts import HostSpec
from suite import run_env, world


@dataclass
class RemoteOptions:
    host: HostSpec
    hosts: tuple[HostSpec, ...] = ()
    """HOSTS=/HOSTFILE=: the nodes of a multi-node run, host being the first
    (provisioning/drive.py)."""
    nodes_run: Any = None
    """group.NodeRunSettings: how the first node reaches and runs the others (None: the defaults)."""
    profile: str = "nccl-gpu"
    stages: str = ""
    """Comma-separated stages ('' = all), validated locally against the suite's stage list."""
    tier: str = ""
    """TIER=: quick | standard | soak (suite/plan/tiers.py), '' for none."""
    burnin_min: str = ""
    """BURNIN_MIN=: the tier's burn-in minutes on the host."""
    runtime: str | None = None
    image: str | None = None
    cuda_line: str | None = None
    """cu130 | cu126 (suite/hardware/cuda_lines.py); None: the newest line the host's driver runs."""
    key: str | None = None
    known_hosts: str | None = None
    ssh_config: str | None = None
    """An ssh_config file instead of ~/.ssh/config (HOST is resolved by `ssh -G` either way)."""
    accept_new_host: bool = False
    remote_dir: str = ""
    """On the host, relative to the login's home unless absolute; '' = a mounted persistent volume's
    cardtime/ (/workspace on pods), else ~/cardtime (preflight.REMOTE_DIR_RULE)."""
    archive: str | None = None
    endpoint_url: str | None = None
    allow_dirty: bool = False
    new_run: bool = False
    """Start a new run even when the host's latest job has the same commit/profile/stages and finished."""
    runs_dir: Path = Path("runs")
    repo: Path = Path(".")
    follow_interval_s: float = 2.0
    detach: str | None = None
    """tmux | setsid; None: tmux when the host has it."""
    fetch_job: str | None = None
    """FETCH=<job-id>: fetch (report, archive) that job's run instead of starting or re-attaching."""
    fetch_exports: bool = False
    """Fetch the regenerable exports too (nsys SQLite beside its report); by default they stay on the host."""
    nproc: int = 0
    """NPROC=: processes per node, fewer than the GPUs preflight counted (0: one per GPU; suite/world.py)."""
    nccl_env: dict[str, str] = field(default_factory=dict)
    """NCCL_ENV=: the file's settings, read and checked on the laptop (suite/run_env.py); the job's folder
    gets them as nccl.env and `suite run --env-file` gives them to every rank."""


def needs_gpu(profile_name: str) -> bool:
    from suite.config import get_profile

    return get_profile(profile_name).device == "cuda"


def world_problem(opts: RemoteOptions, gpus: int) -> str | None:
    """NPROC= above the GPUs preflight counted, or one a profile cannot take: the line that refuses it (a GPU
    profile on a host listing no GPU is preflight's own refusal)."""
    from suite.config import ProfileError

    if gpus == 0 and needs_gpu(opts.profile):
        return None
    try:
        world.run_nproc(opts.profile, gpus, opts.nproc)
    except ProfileError as e:
        return str(e)
    return None


def validate_stages(spec: str) -> str:
    """The stage list in run order, or a usage error naming the stages there are (checked before any SSH)."""
    if not spec:
        return ""
    from suite import stages

    return ",".join(stages.select(spec))


def truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "yes", "true", "on")


def nccl_env_arg(text: str) -> dict[str, str]:
    """NCCL_ENV=FILE (make remote and make slurm): its settings, read and checked on the laptop before any
    connection ({} when not given)."""
    if not text:
        return {}
    try:
        return run_env.read(Path(text).expanduser())
    except run_env.EnvFileError as e:
        raise ValueError(f"NCCL_ENV={text}: {e}") from None
