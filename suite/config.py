"""Profiles: everything a run needs to know about the machine it runs on, as frozen dataclasses.

    python -m suite run --profile gloo-cpu     # the rehearsal: 4 gloo processes on a laptop
    python -m suite run --profile nccl-gpu     # the real thing: one process per GPU, NCCL
    python -m suite run --profile nccl-1gpu    # one CUDA card (a workstation's, a laptop's): one process,
                                               # NCCL

Each field carries its unit in the docstring under it. Validation happens at construction and
names the flag to change, so a wrong profile fails before any card time is spent.

The machine's fields and the sections several stages share (`sweep`, `model`) are here; a section
that is one stage's own is declared by that stage's module (`CONFIG = ConfigSection(...)`, with its
value on each profile) and read as `profile.section(CONFIG)`, typed by its dataclass (docs/stages.md).
"""

from __future__ import annotations

import dataclasses
import math
import typing
from dataclasses import dataclass, field
from typing import Any, Literal

from suite.fromjson import from_plain
from suite.power_of_two import parallel_ranks
from suite.sections import RESERVED, ConfigSection, ProfileError, T, declared_sections

NCCL_TESTS_FORMS = ("mpi", "single")
Launcher = Literal["torchrun", "fork"]
LAUNCHERS: tuple[Launcher, ...] = typing.get_args(Launcher)


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
    """Arguments for every nccl-tests *_perf binary, replacing `-b min -e max -f factor -g … -w … -n … -c
    1`."""
    time_box: bool = True
    """Stop a sweep growing when its next size, predicted from the sizes before it, would pass the stage's
    remaining time (suite/costmodel/size_budget.py); False: every size runs whatever the clock (a drill of the
    timeout)."""
    nccl_tests_form: str = "mpi"
    """How nccl-tests drives the GPUs: "mpi" — `mpirun -np <nproc> <binary> … -g 1`, one process per GPU as
    torch runs (NVIDIA's multi-process form; the binaries must be built with MPI=1); "single" — one process
    driving every GPU, `<binary> … -g <nproc>` (ncclCommInitAll, no MPI needed)."""

    def __post_init__(self) -> None:
        whole = lambda v: isinstance(v, int) and not isinstance(v, bool)  # noqa: E731 - 1e400 is a float: inf
        if not (
            whole(self.min_bytes)
            and whole(self.max_bytes)
            and whole(self.factor)
            and 1 <= self.min_bytes <= self.max_bytes <= 1 << 60
            and self.factor >= 2
        ):
            raise ProfileError(
                f"sweep sizes min_bytes={self.min_bytes!r} max_bytes={self.max_bytes!r} "
                f"factor={self.factor!r}: whole numbers, 1 ≤ min ≤ max ≤ 2^60 bytes, factor ≥ 2"
            )
        if self.nccl_tests_form not in NCCL_TESTS_FORMS:
            raise ProfileError(
                f"sweep.nccl_tests_form {self.nccl_tests_form!r} unknown: use {' or '.join(NCCL_TESTS_FORMS)}"
            )

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
class Profile:
    """One machine's way of running the suite."""

    name: str
    """Profile name, part of the run id."""
    backend: Literal["gloo", "nccl"]
    """torch.distributed backend."""
    device: Literal["cpu", "cuda"]
    """Device type the workloads use."""
    nproc: int
    """Processes per node: 4 in the rehearsal, one per GPU on a GPU box."""
    omp_threads: int = 1
    """OMP_NUM_THREADS for every worker: more threads than cores per rank oversubscribes the CPU."""
    master_addr: str = "127.0.0.1"
    """Rendezvous address; explicit loopback so gloo never resolves the hostname outward."""
    master_port: int | None = None
    """Rendezvous port; None picks a free one per launch (a port held by last round's processes is the classic
    trap)."""
    launcher: Launcher = "torchrun"
    """How a stage's ranks start: "torchrun" (one `python -m torch.distributed.run` per launch, as users
    launch) or "fork" (the CPU rehearsal: forked from one process that imported torch once;
    suite/launch/forklaunch.py)."""
    stage_timeout_s: float = 300.0
    """Wall-clock limit of one stage, seconds; past it the stage is killed and judged `fail`."""
    stage_timeouts_s: tuple[tuple[str, float], ...] = ()
    """Per-stage overrides of stage_timeout_s, as (stage, seconds) pairs."""
    collective_timeout_s: float = 60.0
    """Process-group timeout of every worker, seconds: a rank on a different branch must not hang forever."""
    degrees: tuple[int, ...] = (1, 2, 4)
    """TP and DP degrees measured by the scaling stages, within one node (each ≤ nproc); on a multi-node
    profile dp and zero add the degrees that span whole nodes (dp_degrees)."""
    sweep: SweepConfig = field(default_factory=SweepConfig)
    """Collective sweep sizes and iterations."""
    model: GptConfig = field(default_factory=GptConfig)
    """The model of the scaling stages."""
    judge_performance: bool = False
    """Whether performance verdicts are judged; on a CPU they are `skip`: CPU numbers say nothing about
    GPUs."""
    nodes: tuple[str, ...] = ()
    """The nodes of a multi-node run as SSH destinations ([user@]host[:port]), the first being the node the
    suite runs on and the rendezvous host; () or one node is a single-node run
    (suite/cluster/multinode.py)."""
    ssh_config: str = ""
    """The ssh_config file the suite reaches the other nodes with ('' : ssh's own)."""
    node_launcher: Literal["ssh", "srun"] = "ssh"
    """How a multi-node launch reaches the other nodes: ssh (one per node) or srun (one across a Slurm
    allocation)."""
    socket_ifname: str = ""
    """GLOO_SOCKET_IFNAME / NCCL_SOCKET_IFNAME on every node of a multi-node run ('' : the libraries
    choose)."""
    node_addrs: tuple[str, ...] = ()
    """Each node's address toward the other nodes, in the nodes' order (suite/cluster/node_addrs.py; () :
    their names)."""
    sections: tuple[tuple[str, Any], ...] = ()
    """Values of stage-declared config sections (ConfigSection) that differ from the declared value for this
    profile, as (section, value) pairs; read them as `profile.section(CONFIG)`."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "sections", self._own_sections(self.sections))
        if self.backend not in ("gloo", "nccl"):
            raise ProfileError(f"backend {self.backend!r} unknown: use gloo or nccl")
        if self.device not in ("cpu", "cuda"):
            raise ProfileError(f"device {self.device!r} unknown: use cpu or cuda")
        if self.nproc < 1:
            raise ProfileError(f"nproc = {self.nproc}: pass --nproc of at least 1")
        if self.launcher not in LAUNCHERS:
            raise ProfileError(f"launcher {self.launcher!r} unknown: use --launcher {' or '.join(LAUNCHERS)}")
        if self.launcher == "fork" and (self.backend, self.device) != ("gloo", "cpu"):
            raise ProfileError(
                f"launcher fork is the CPU rehearsal's (gloo on cpu), not {self.backend} on "
                f"{self.device}: GPU stages launch under torchrun, one process per GPU; "
                f"use --launcher torchrun"
            )
        too_big = [d for d in self.degrees if d > self.nproc]
        if too_big:
            raise ProfileError(
                f"degrees {too_big} exceed nproc {self.nproc}: lower --nproc's degrees or raise --nproc"
                + (
                    f" (degrees are within a node; dp and zero add the whole-node degrees "
                    f"{', '.join(map(str, scaling_degrees((), self.nproc, len(self.nodes))))} by themselves)"
                    if len(self.nodes) > 1
                    else ""
                )
            )
        m = self.model
        for d in self.degrees:
            if m.heads % d or m.hidden % d:
                raise ProfileError(f"TP degree {d} must divide heads {m.heads} and hidden {m.hidden}")
            if m.batch % d:
                raise ProfileError(f"DP degree {d} must divide the global batch {m.batch}")

    def _own_sections(self, pairs) -> tuple[tuple[str, Any], ...]:
        """Checked and in one form: only the values that differ from the declaration, sorted by name."""
        out = {}
        for name, value in pairs:
            declared = declared_sections().get(name)
            if declared is None:
                raise ProfileError(
                    f"config section {name!r} is declared by no stage: choose from "
                    f"{', '.join(sorted(declared_sections())) or '(none)'}"
                )
            if not isinstance(value, declared.type):
                raise ProfileError(
                    f"config section {name!r} must be a {declared.type.__name__}, not {type(value).__name__}"
                )
            if value != declared.value_for(self.name):
                out[name] = value
        return tuple(sorted(out.items()))

    def section(self, which: ConfigSection[T] | str) -> T:
        """A stage's config section on this profile: `profile.section(CONFIG)` in the stage's own folder
        (typed as CONFIG's dataclass), or by its name elsewhere."""
        name = which if isinstance(which, str) else which.name
        own = dict(self.sections)
        if name in own:
            return own[name]
        declared = declared_sections().get(name) if isinstance(which, str) else which
        if declared is None:
            raise ProfileError(
                f"profile has no config section {name!r}: no stage module declares it "
                f"(declared: {', '.join(sorted(declared_sections())) or 'none'})"
            )
        return declared.value_for(self.name)

    @property
    def world(self) -> int:
        """Ranks of a full launch: nproc on each node."""
        return self.nproc * max(1, len(self.nodes))

    @property
    def dp_degrees(self) -> tuple[int, ...]:
        """The degrees dp measures: `degrees` (within node 0), then on a multi-node profile whole nodes
        (scaling_degrees)."""
        return scaling_degrees(self.degrees, self.nproc, len(self.nodes))

    @property
    def cross_node_degrees(self) -> tuple[int, ...]:
        """The DP/ZeRO degrees that span nodes (ranks node-major: nproc × 2 is the first two nodes); () on one
        node."""
        return tuple(d for d in self.dp_degrees if d > self.nproc)

    @property
    def zero_degrees(self) -> tuple[int, ...]:
        """The degrees zero measures: one node's parallel ranks, then each cross-node degree."""
        return (self.parallel_ranks, *self.cross_node_degrees)

    @property
    def parallel_ranks(self) -> int:
        """The ranks zero, pp, cp, ep, overlap and profile run on (suite/power_of_two.py)."""
        return parallel_ranks(self.nproc, len(self.nodes))

    @property
    def dp_model(self) -> GptConfig:
        """The model dp and zero train: the profile's, its global batch raised to the least multiple that
        every DP degree divides (2 nodes × 8 with batch 8: 16, one sequence per rank at DP=16); the profile's
        own on one node, whose degrees divide it already (checked above)."""
        batch = math.lcm(self.model.batch, *self.dp_degrees)
        return self.model if batch == self.model.batch else dataclasses.replace(self.model, batch=batch)

    @property
    def is_rehearsal(self) -> bool:
        """True when the suite runs on CPUs: the correctness face of every stage, no performance verdicts."""
        return self.device == "cpu"

    def timeout_for(self, stage: str) -> float:
        """Wall-clock limit of `stage`, seconds."""
        return dict(self.stage_timeouts_s).get(stage, self.stage_timeout_s)

    def with_overrides(self, **changes) -> "Profile":
        """A copy with fields or config sections replaced (validated again)."""
        fields = {f.name for f in dataclasses.fields(self)}
        sections = {k: changes.pop(k) for k in list(changes) if k not in fields and k in declared_sections()}
        if "name" in changes and "sections" not in changes:  # a renamed profile keeps its sections' values
            sections = {**{n: self.section(n) for n in declared_sections()}, **sections}
        if sections:
            changes["sections"] = tuple({**dict(self.sections), **sections}.items())
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict:
        """Every field, and every declared config section under its name (as the manifest records it)."""
        data = dataclasses.asdict(self)
        del data["sections"]
        data.update({name: dataclasses.asdict(self.section(name)) for name in sorted(declared_sections())})
        return data


RESERVED.update(f.name for f in dataclasses.fields(Profile))  # a stage's section may not take a field's name

GLOO_CPU = Profile(
    name="gloo-cpu",
    backend="gloo",
    device="cpu",
    nproc=4,
    omp_threads=1,
    launcher="fork",
    stage_timeout_s=180.0,
    # The fault drill waits on real timeouts in its hang scenario.
    stage_timeouts_s=(("fault", 240.0),),
    collective_timeout_s=60.0,
    degrees=(1, 2, 4),
    # The rehearsal checks semantics and shape, not speed: 7 sizes (8 B, 64 B, … 2 MiB: the same largest as
    # factor 4's ten), one warm-up and 3 timed iterations each; one warm-up and one timed training step per
    # measurement (the golden checks still train warm-up + steps = 2 AdamW steps, moments included).
    sweep=SweepConfig(min_bytes=8, max_bytes=2 * 1024 * 1024, factor=8, warmup_iters=1, iters=3),
    model=GptConfig(steps=1, warmup_steps=1),
    judge_performance=False,
)

NCCL_GPU = Profile(
    name="nccl-gpu",
    backend="nccl",
    device="cuda",
    nproc=8,
    omp_threads=8,
    stage_timeout_s=900.0,
    # fault: six drills (three scenarios under two TORCH_NCCL_ASYNC_ERROR_HANDLING settings).
    stage_timeouts_s=(("bandwidth", 1800.0), ("crossover", 1200.0), ("fault", 2700.0)),
    collective_timeout_s=300.0,
    degrees=(1, 2, 4, 8),
    sweep=SweepConfig(
        min_bytes=8, max_bytes=8 * 1024**3, factor=2, warmup_iters=5, iters=20, dtype="float32"
    ),
    # 8 layers × d=2048, seq 1024, batch 8: 537 M parameters, 3.02 GFLOP per token (costmodel/sizing.py); see
    # suite/workloads/gpt.py.
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
    judge_performance=True,
)

# One card, one process: what a single GPU adds to the rehearsal. The model is sized for a
# 16 GB card: d=1024, 8 layers, seq 1024, batch 4, vocab 32768 → 167.8 M parameters (8 × 12.6 M in blocks
# + 2 × 33.6 M embedding and head); 16 B per parameter (mixed-precision AdamW) is 2.7 GB, activations
# ≈ s·b·h·34 per layer ≈ 143 MB × 8 layers: it fits beside the memory stage's batch search.
NCCL_1GPU = Profile(
    name="nccl-1gpu",
    backend="nccl",
    device="cuda",
    nproc=1,
    omp_threads=4,
    stage_timeout_s=600.0,
    collective_timeout_s=120.0,
    degrees=(1,),
    sweep=SweepConfig(
        min_bytes=8, max_bytes=256 * 1024**2, factor=4, warmup_iters=3, iters=10, dtype="float32"
    ),
    model=GptConfig(
        vocab=32768,
        hidden=1024,
        layers=8,
        heads=16,
        seq_len=1024,
        batch=4,
        dtype="bfloat16",
        steps=10,
        warmup_steps=3,
    ),
    judge_performance=True,
)


def scaling_degrees(degrees: typing.Sequence[int], nproc: int, nodes: int) -> tuple[int, ...]:
    """DP degrees over `nodes` nodes of `nproc` ranks each: the within-node `degrees`, then on 2+ nodes whole
    nodes doubling up to the world and the world itself: 2 × 8 → 1, 2, 4, 8, 16; 4 × 8 → …, 16, 32; 3 × 8 → …,
    16, 24. Ranks are node-major (torchrun numbers node g's ranks g·nproc …), so degree d is ranks 0…d−1:
    within node 0 up to nproc, then ⌈d / nproc⌉ whole nodes."""
    out = set(degrees)
    if nodes > 1:
        spanned = 2
        while spanned < nodes:
            out.add(nproc * spanned)
            spanned *= 2
        out.add(nproc * nodes)
    return tuple(sorted(out))


PROFILES: dict[str, Profile] = {p.name: p for p in (GLOO_CPU, NCCL_GPU, NCCL_1GPU)}


def get_profile(name: str, nproc: int | None = None) -> Profile:
    """The named profile, with --nproc applied (a GPU box with 4 cards runs nccl-gpu with nproc 4)."""
    try:
        profile = PROFILES[name]
    except KeyError:
        raise ProfileError(f"profile {name!r} unknown: choose one of {', '.join(PROFILES)}") from None
    if nproc is not None and nproc != profile.nproc and profile.name == NCCL_1GPU.name:
        raise ProfileError(
            f"profile {name} is one process on one card: drop --nproc {nproc}, or use nccl-gpu "
            f"for {nproc} cards"
        )
    if nproc is not None and nproc != profile.nproc:
        degrees = tuple(d for d in profile.degrees if d <= nproc) or (1,)
        profile = profile.with_overrides(nproc=nproc, degrees=degrees)
    return profile


def profile_from_dict(data: dict) -> Profile:
    """Rebuild a profile recorded in a manifest (resume runs the profile the run started with).

    Generic over the dataclasses' fields, recursively: a nested config comes back as its dataclass and a
    tuple as a tuple, whatever the field; keys no field has (a field since removed) are dropped; a declared
    config section comes back as its dataclass.
    """
    if not isinstance(data, dict):
        raise ProfileError(f"the recorded profile is a {type(data).__name__}, not a mapping")
    declared = declared_sections()
    profile = from_plain(Profile, {k: v for k, v in data.items() if k not in declared and k != "sections"})
    sections = {name: from_plain(declared[name].type, data[name]) for name in declared if name in data}
    return profile.with_overrides(**sections) if sections else profile
