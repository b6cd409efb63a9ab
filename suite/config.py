"""Profiles: everything a run needs to know about the machine it runs on, as frozen dataclasses.

    python -m suite run --profile gloo-cpu     # the rehearsal: 4 gloo processes on a laptop
    python -m suite run --profile nccl-gpu     # the real thing: one process per GPU, NCCL

Each field carries its unit in the docstring under it. Validation happens at construction and
names the flag to change, so a wrong profile fails before any card time is spent.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field


class ProfileError(ValueError):
    """A profile that cannot run; the message names what to change."""


@dataclass(frozen=True, kw_only=True)
class SweepConfig:
    """Message sizes and iteration counts of the collective sweeps (bandwidth, crossover)."""

    min_bytes: int = 8
    """Smallest message, bytes (nccl-tests -b)."""
    max_bytes: int = 4 * 1024 * 1024
    """Largest message, bytes (nccl-tests -e)."""
    factor: int = 2
    """Size multiplier between steps (nccl-tests -f)."""
    warmup_iters: int = 2
    """Untimed iterations before each size (nccl-tests -w)."""
    iters: int = 5
    """Timed iterations per size (nccl-tests -n)."""
    dtype: str = "float32"
    """Element type of the sweep buffers (torch dtype name)."""
    nccl_tests_args: tuple[str, ...] = ()
    """Extra arguments for every nccl-tests *_perf binary; empty means `-b min -e max -f factor -g 1`."""

    def sizes(self) -> list[int]:
        """Every message size of the sweep, bytes, smallest first."""
        out, size = [], self.min_bytes
        while size <= self.max_bytes:
            out.append(size)
            size *= self.factor
        return out


@dataclass(frozen=True, kw_only=True)
class GptConfig:
    """The fixed GPT-style decoder every scaling stage trains (suite/workloads/gpt.py)."""

    vocab: int = 256
    """Vocabulary size, tokens."""
    hidden: int = 32
    """Hidden size d_model; a multiple of heads and of every TP degree."""
    layers: int = 2
    """Decoder blocks."""
    heads: int = 4
    """Attention heads; a multiple of every TP degree."""
    mlp_ratio: int = 4
    """MLP hidden size = mlp_ratio × hidden."""
    seq_len: int = 16
    """Tokens per sequence."""
    batch: int = 8
    """Global batch, sequences per step (divided among DP ranks)."""
    tied_head: bool = False
    """Share the embedding matrix with the output head."""
    dtype: str = "float32"
    """Parameter and activation dtype (bfloat16 on GPUs)."""
    steps: int = 3
    """Timed training steps per measurement."""
    warmup_steps: int = 1
    """Untimed steps before timing."""
    seed: int = 1234
    """One seed for weights and synthetic batches, the same on every rank."""


@dataclass(frozen=True, kw_only=True)
class FaultConfig:
    """The fault drill (stage 9)."""

    pg_timeout_s: float = 5.0
    """Process-group timeout the drill sets, seconds: a stopped rank is only detected after it."""
    steps: int = 8
    """Training steps of the drill."""
    checkpoint_every: int = 2
    """Steps between torch.distributed.checkpoint saves."""
    fault_step: int = 5
    """Step at which the chosen rank faults."""
    fault_rank: int = 1
    """The rank that faults."""
    scenarios: tuple[str, ...] = ("crash", "hang", "exception")
    """Which drills to run."""
    ranks: int = 0
    """Processes of the drill; 0 means every process of the profile (nproc)."""
    loss_tolerance: float = 1e-5
    """Largest |loss − the uninterrupted reference's| after resuming, nats: beyond it the run left its trajectory."""
    detect_warn_after_s: float = 10.0
    """Detection later than pg_timeout_s plus this, seconds, is a warning."""
    hang_after_s: float = 30.0
    """No surviving rank raising (and no restart) within pg_timeout_s plus this, seconds, is a hang: fail."""
    drill_timeout_s: float = 120.0
    """Wall-clock limit of one scenario's launch, seconds: two start-ups, the process-group timeout and
    torchrun's 30-s wait for a stopped rank fit in it; past it the drill is killed and judged a hang."""
    concurrent: bool = False
    """Run the scenarios' launches at the same time (CPU rehearsal: their start-ups and waits overlap;
    never on GPUs, where each launch takes every card)."""

    def __post_init__(self) -> None:
        unknown = [s for s in self.scenarios if s not in ("crash", "hang", "exception")]
        if unknown:
            raise ProfileError(f"fault scenarios {unknown} unknown: choose from crash, hang, exception")
        if not 0 <= self.fault_step < self.steps:
            raise ProfileError(f"fault_step {self.fault_step} must lie in [0, steps={self.steps})")
        if self.checkpoint_every < 1:
            raise ProfileError(f"checkpoint_every {self.checkpoint_every} must be at least 1")
        if self.ranks == 1 or (self.ranks and self.fault_rank >= self.ranks):
            raise ProfileError(f"the drill needs ≥ 2 ranks and fault_rank {self.fault_rank} < ranks {self.ranks}")


@dataclass(frozen=True, kw_only=True)
class Profile:
    """One machine's way of running the suite."""

    name: str
    """Profile name, part of the run id."""
    backend: str
    """torch.distributed backend: gloo or nccl."""
    device: str
    """Device type the workloads use: cpu or cuda."""
    nproc: int
    """Processes per node: 4 in the rehearsal, one per GPU on a GPU box."""
    omp_threads: int = 1
    """OMP_NUM_THREADS for every worker: more threads than cores per rank oversubscribes the CPU."""
    master_addr: str = "127.0.0.1"
    """Rendezvous address; explicit loopback so gloo never resolves the hostname outward."""
    master_port: int | None = None
    """Rendezvous port; None picks a free one per launch (a port held by last round's processes is the classic trap)."""
    stage_timeout_s: float = 300.0
    """Wall-clock limit of one stage, seconds; past it the stage is killed and judged `fail`."""
    stage_timeouts_s: tuple[tuple[str, float], ...] = ()
    """Per-stage overrides of stage_timeout_s, as (stage, seconds) pairs."""
    collective_timeout_s: float = 60.0
    """Process-group timeout of every worker, seconds: a rank on a different branch must not hang forever."""
    degrees: tuple[int, ...] = (1, 2, 4)
    """TP and DP degrees measured by the scaling stages."""
    sweep: SweepConfig = field(default_factory=SweepConfig)
    """Collective sweep sizes and iterations."""
    model: GptConfig = field(default_factory=GptConfig)
    """The model of the scaling stages."""
    fault: FaultConfig = field(default_factory=FaultConfig)
    """The fault drill."""
    judge_performance: bool = False
    """Whether performance verdicts are judged; on a CPU they are `skip`: CPU numbers say nothing about GPUs."""

    def __post_init__(self) -> None:
        if self.backend not in ("gloo", "nccl"):
            raise ProfileError(f"backend {self.backend!r} unknown: use gloo or nccl")
        if self.device not in ("cpu", "cuda"):
            raise ProfileError(f"device {self.device!r} unknown: use cpu or cuda")
        if self.nproc < 1:
            raise ProfileError(f"nproc = {self.nproc}: pass --nproc of at least 1")
        too_big = [d for d in self.degrees if d > self.nproc]
        if too_big:
            raise ProfileError(
                f"degrees {too_big} exceed nproc {self.nproc}: lower --nproc's degrees or raise --nproc"
            )
        m = self.model
        for d in self.degrees:
            if m.heads % d or m.hidden % d:
                raise ProfileError(f"TP degree {d} must divide heads {m.heads} and hidden {m.hidden}")
            if m.batch % d:
                raise ProfileError(f"DP degree {d} must divide the global batch {m.batch}")

    @property
    def is_rehearsal(self) -> bool:
        """True when the suite runs on CPUs: the correctness face of every stage, no performance verdicts."""
        return self.device == "cpu"

    def timeout_for(self, stage: str) -> float:
        """Wall-clock limit of `stage`, seconds."""
        return dict(self.stage_timeouts_s).get(stage, self.stage_timeout_s)

    def with_overrides(self, **changes) -> "Profile":
        """A copy with fields replaced (validated again)."""
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


GLOO_CPU = Profile(
    name="gloo-cpu",
    backend="gloo",
    device="cpu",
    nproc=4,
    omp_threads=1,
    stage_timeout_s=180.0,
    # The fault drill waits on real timeouts in its hang scenario.
    stage_timeouts_s=(("fault", 240.0),),
    collective_timeout_s=60.0,
    degrees=(1, 2, 4),
    sweep=SweepConfig(min_bytes=8, max_bytes=4 * 1024 * 1024, factor=4, warmup_iters=2, iters=5),
    model=GptConfig(),
    # 2 ranks: every launch and restart pays each rank's `import torch` on 2 cores; the drill needs only a survivor.
    fault=FaultConfig(ranks=2, concurrent=True),
    judge_performance=False,
)

NCCL_GPU = Profile(
    name="nccl-gpu",
    backend="nccl",
    device="cuda",
    nproc=8,
    omp_threads=8,
    stage_timeout_s=900.0,
    stage_timeouts_s=(("bandwidth", 1800.0), ("crossover", 1200.0), ("fault", 1500.0)),
    collective_timeout_s=300.0,
    degrees=(1, 2, 4, 8),
    sweep=SweepConfig(
        min_bytes=8, max_bytes=8 * 1024**3, factor=2, warmup_iters=5, iters=20, dtype="float32"
    ),
    # 8 layers × d=2048, seq 1024, batch 8: 537 M parameters, 3.42 GFLOP per token; see suite/workloads/gpt.py.
    model=GptConfig(
        vocab=32768,
        hidden=2048,
        layers=8,
        heads=16,
        seq_len=1024,
        batch=8,
        dtype="bfloat16",
        steps=10,
        warmup_steps=3,
    ),
    # bf16 on 8 cards: DDP's all-reduce and the one-card reference sum in other orders (tolerance not yet measured).
    fault=FaultConfig(pg_timeout_s=60.0, steps=40, checkpoint_every=10, fault_step=25, loss_tolerance=5e-2,
                      drill_timeout_s=420.0),
    judge_performance=True,
)

PROFILES: dict[str, Profile] = {p.name: p for p in (GLOO_CPU, NCCL_GPU)}


def get_profile(name: str, nproc: int | None = None) -> Profile:
    """The named profile, with --nproc applied (a GPU box with 4 cards runs nccl-gpu with nproc 4)."""
    try:
        profile = PROFILES[name]
    except KeyError:
        raise ProfileError(f"profile {name!r} unknown: choose one of {', '.join(PROFILES)}") from None
    if nproc is not None and nproc != profile.nproc:
        degrees = tuple(d for d in profile.degrees if d <= nproc) or (1,)
        profile = profile.with_overrides(nproc=nproc, degrees=degrees)
    return profile


def profile_from_dict(data: dict) -> Profile:
    """Rebuild a profile recorded in a manifest (resume runs the profile the run started with)."""
    data = dict(data)
    data["sweep"] = SweepConfig(**{**data["sweep"], "nccl_tests_args": tuple(data["sweep"].get("nccl_tests_args", ()))})
    data["model"] = GptConfig(**data["model"])
    fault = dict(data["fault"])
    fault["scenarios"] = tuple(fault.get("scenarios", ()))
    data["fault"] = FaultConfig(**fault)
    data["degrees"] = tuple(data["degrees"])
    data["stage_timeouts_s"] = tuple(tuple(x) for x in data.get("stage_timeouts_s", ()))
    known = {f.name for f in dataclasses.fields(Profile)}
    return Profile(**{k: v for k, v in data.items() if k in known})
