"""Before renting: how long every stage will take on the GPU profile, and what the hours cost.

    python -m suite plan --profile nccl-gpu --gpus 8 --rate 24      # make plan RATE=24

Each stage module estimates itself (its `estimate(p)`, given the PlanInputs below); this module adds them up
in run order. Pure arithmetic, no torch (suite/costmodel/sizing.py sizes the model), from the profile (sweep
sizes, iterations, model size, steps), the α-β model (suite/costmodel/alphabeta.py) with β at the GPU's link
peak, the GPU's bf16 peak (suite/hardware/gpus.py) at an assumed MFU, and a few fixed costs a GPU node always
pays (named in PlanAssumptions, each with its reason). The goal it is held to: the whole checklist inside one
hour of card time.

Collective time on the bus: one nccl-tests size costs (warmup + iters) × 2 placements (out of
place, in place) × t(S), with t from the α-β model; e.g. all_reduce of 8 GiB over 8 H100s,
α = 5 µs, β = 450 GB/s: 2·7·(5 µs + 8.59e9 B / (8 · 450e9 B/s)) = 33.5 ms, × 25 × 2 = 1.7 s.
Training step: FLOPs/token × tokens/step ÷ (peak × MFU); the model's communication is added per
strategy (TP: 4 activation all-reduces per layer; DP: one gradient all-reduce; ZeRO: 1–1.5 of them).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from suite import stages
from suite.config import Profile, scaling_degrees
from suite.costmodel import alphabeta as ab
from suite.costmodel.sizing import parameter_count, training_flops_per_token
from suite.dtypes import DTYPE_BYTES
from suite.hardware.gpus import gpu_for
from suite.plan import setup as plan_setup
from suite.plan.setup import SetupAssumptions, SetupLine
from suite.power_of_two import parallel_ranks

ONE_HOUR_S = 3600.0


@dataclass(frozen=True, kw_only=True)
class PlanAssumptions:
    """What the estimate assumes beyond the profile; each can be changed on the command line."""

    gpu_name: str = "NVIDIA H100 80GB HBM3"
    """The GPU the box is rented with (picks the link peak and the bf16 peak)."""
    alpha_s: float = 5e-6
    """Per-step latency of one collective step, s (CHECKLIST.md's worked example)."""
    beta_Bps: float | None = None
    """Per-step bandwidth, bytes/s; None: the GPU's NVLink peak per direction (H100: 18 × 25 GB/s = 450
    GB/s)."""
    mfu: float = 0.35
    """Model FLOPs utilisation assumed for the training-step time (0.3–0.45 is typical for a model this
    size)."""
    step_s: float | None = None
    """One training step of the profile's model on one card, s, as measured (the library's baseline median);
    None: from the FLOPs at `mfu`."""
    torchrun_launch_s: float = 25.0
    """One torchrun launch on a GPU node: import torch ~2 s, CUDA context ~3 s per process, NCCL init, model
    build."""
    nccl_tests_launch_s: float = 8.0
    """One nccl-tests *_perf start: mpirun, communicator init, buffer allocation and validation set-up."""
    topology_s: float = 20.0
    """nvidia-smi -q and topo -m on every GPU, NUMA facts, versions."""
    nsys_export_s: float = 90.0
    """nsys profile's finalisation plus `nsys export --type sqlite` of 8 reports."""
    torchrun_restart_wait_s: float = 30.0
    """torchrun waits this long before SIGKILLing a stopped worker (FACTS.md)."""
    nodes: int = 1
    """Nodes of a multi-node run (make plan NODES=2 or HOSTS=a,b): every launch spans them, nproc GPUs
    each."""
    inter_node_Bps: float = ab.INTER_NODE_BETA_Bps
    """Inter-node bandwidth per GPU, bytes/s: NIC line rate × NICs per node ÷ GPUs per node (8 × 400 Gb/s NICs
    for 8 GPUs, the usual H100 cluster node: 50 GB/s). A ring across nodes runs at its slowest hop: this
    one."""
    rendezvous_s: float = 10.0
    """What a launch across nodes adds to one on a node: the ssh to each node, c10d's rendezvous, the
    joins."""


@dataclass(frozen=True)
class StageEstimate:
    stage: str
    seconds: float
    basis: str
    """How the figure was reached, in a line."""


@dataclass
class Plan:
    profile: str
    gpus: int
    gpu: str
    alpha_s: float
    beta_Bps: float
    nodes: int = 1
    stages: list[StageEstimate] = field(default_factory=list)
    rate_per_hour: float | None = None
    before: list[SetupLine] = field(default_factory=list)
    """Set-up the box is billed for before the first stage (image, code sync, venv)."""
    after: list[SetupLine] = field(default_factory=list)
    """After the last stage (fetch; the archive, from the laptop, unbilled)."""
    tier: str = ""
    """The tier planned (suite/plan/tiers.py), "" for every stage of the profile."""

    @property
    def total_s(self) -> float:
        """The stages alone (the one-hour goal is about them)."""
        return sum(s.seconds for s in self.stages)

    @property
    def billed_s(self) -> float:
        """What the renter pays for: the billed set-up lines, the stages and the fetch."""
        return self.total_s + sum(line.seconds for line in self.before + self.after if line.billed)

    @property
    def cost(self) -> float | None:
        return None if self.rate_per_hour is None else self.billed_s / 3600.0 * self.rate_per_hour

    @property
    def fits_one_hour(self) -> bool:
        return self.total_s <= ONE_HOUR_S


def sweep_time_s(
    collective: str,
    sizes: list[int],
    n: int,
    alpha_s: float,
    beta_Bps: float,
    repeats: int,
    placements: int = 2,
    algo: str = "ring",
) -> float:
    """Bus time of one sweep: Σ over sizes of repeats × placements × t(S)."""
    return sum(
        repeats * placements * ab.collective_time_s(collective, s, n, alpha_s, beta_Bps, algo=algo)
        for s in sizes
    )


def step_compute_s(profile: Profile, peak_flops: float, mfu: float) -> float:
    """One training step of the whole global batch on one card: FLOPs/token × tokens ÷ (peak × MFU)."""
    m = profile.model
    return training_flops_per_token(m) * m.batch * m.seq_len / (peak_flops * mfu)


@dataclass(frozen=True)
class PlanInputs:
    """What a stage module's estimate(p) is given: the profile, the assumptions and the α-β model at hand."""

    profile: Profile
    assume: PlanAssumptions
    gpus: int
    alpha_s: float
    beta_Bps: float
    peak_flops: float
    """The GPU's dense bf16 peak, FLOP/s."""
    gpus_per_node: int = 0
    """GPUs on each node (0: all of them on one); a multi-node plan's dp and zero hold the degrees within a
    node to intra_beta_Bps and those spanning nodes to beta_Bps (the inter-node hop)."""
    intra_beta_Bps: float | None = None
    """β within a node, bytes/s (None: beta_Bps, a single-node plan)."""

    @property
    def per_node(self) -> int:
        return self.gpus_per_node or self.gpus

    @property
    def dp_degrees(self) -> tuple[int, ...]:
        """dp's degrees: the profile's within a node, then across nodes whole nodes (suite/config.py
        scaling_degrees)."""
        return scaling_degrees(
            [d for d in self.profile.degrees if d <= self.per_node], self.per_node, self.gpus // self.per_node
        )

    @property
    def zero_degrees(self) -> tuple[int, ...]:
        """zero's degrees: one node's parallel ranks, then each whole-node degree (Profile.zero_degrees)."""
        first = self.per_node if self.gpus > self.per_node else self.parallel_ranks
        return (first, *(d for d in self.dp_degrees if d > self.per_node))

    @property
    def parallel_ranks(self) -> int:
        """The world of zero, pp, cp, ep, overlap and profile, as the run takes it (suite/power_of_two.py):
        the largest power of two within one node's GPUs; every GPU of a multi-node plan (each node launches
        all)."""
        return self.gpus if self.gpus > self.per_node else parallel_ranks(self.gpus)

    @property
    def dp_batch(self) -> int:
        """The global batch dp and zero train: the profile's raised to a multiple of every DP degree
        (Profile.dp_model)."""
        return math.lcm(self.profile.model.batch, *self.dp_degrees)

    @property
    def dp_step_s(self) -> float:
        """One card's step on dp's global batch (compute only: step_s × the batch's growth)."""
        return self.step_s * self.dp_batch / self.profile.model.batch

    def allreduce_s(self, size_bytes: float, n: int) -> float:
        """A ring all-reduce over n cards, node-major: within a node at the intra-node β, across at the
        inter-node (suite/costmodel/alphabeta.py allreduce_across_nodes_s)."""
        intra = self.intra_beta_Bps if self.intra_beta_Bps is not None else self.beta_Bps
        return ab.allreduce_across_nodes_s(
            size_bytes, n, self.per_node, (self.alpha_s, intra), (self.alpha_s, self.beta_Bps)
        )

    @property
    def sizes(self) -> list[int]:
        """The collective sweep's message sizes, bytes."""
        return self.profile.sweep.sizes()

    @property
    def repeats(self) -> int:
        """Iterations per sweep size, warm-up included."""
        return self.profile.sweep.warmup_iters + self.profile.sweep.iters

    @property
    def steps(self) -> int:
        """Training steps per scaling measurement, warm-up included."""
        return self.profile.model.warmup_steps + self.profile.model.steps

    @property
    def params(self) -> int:
        return parameter_count(self.profile.model)

    @property
    def dtype_bytes(self) -> int:
        return DTYPE_BYTES.get(self.profile.model.dtype, 4)

    @property
    def grad_bytes(self) -> int:
        """The model's gradients (= its parameters), bytes."""
        return self.params * self.dtype_bytes

    @property
    def step_s(self) -> float:
        """One training step of the global batch on one card (compute only); measured where known."""
        if self.assume.step_s is not None:
            return self.assume.step_s
        return step_compute_s(self.profile, self.peak_flops, self.assume.mfu)

    def sweep_s(self, collective: str, placements: int = 2, algo: str = "ring") -> float:
        """Bus time of the profile's sweep of `collective` over every GPU."""
        return sweep_time_s(
            collective,
            self.sizes,
            self.gpus,
            self.alpha_s,
            self.beta_Bps,
            self.repeats,
            placements=placements,
            algo=algo,
        )

    def collective_s(self, collective: str, size_bytes: float, n: int) -> float:
        return ab.collective_time_s(collective, size_bytes, n, self.alpha_s, self.beta_Bps)

    def dp_comm_s(self, n: int) -> float:
        """DDP's gradient all-reduce per step over n cards (one all-reduce of every gradient)."""
        return self.allreduce_s(self.grad_bytes, n)

    def zero_comm_s(self, zero: int, n: int) -> float:
        """ZeRO stage `zero`'s communication per step over n cards, in all-reduces of the parameters."""
        return ab.ZERO_COMM_ALLREDUCES[zero] * self.allreduce_s(self.grad_bytes, n)


def plan_inputs(profile: Profile, a: PlanAssumptions = PlanAssumptions()) -> PlanInputs:
    if a.nodes < 1 or a.inter_node_Bps <= 0:
        raise ValueError(
            f"nodes {a.nodes} / inter-node β {a.inter_node_Bps:g} B/s: give ≥ 1 node and a positive rate"
        )
    peak = gpu_for(a.gpu_name)
    # a switched board's NVLink, else PCIe
    link_GBps = (peak.nvlink_full_GBps or peak.pcie_x16_GBps) if peak else None
    if a.beta_Bps is None and link_GBps is None:
        raise ValueError(f"GPU {a.gpu_name!r} has no known link peak: pass --beta (bytes/s) or a known --gpu")
    beta = a.beta_Bps if a.beta_Bps is not None else link_GBps * 1e9
    intra, per_node = beta, profile.nproc
    if peak is None or peak.bf16_dense_flops is None:
        raise ValueError(
            f"GPU {a.gpu_name!r} has no known bf16 peak: pass a known --gpu (e.g. H100, A100, B200)"
        )
    if a.nodes > 1:  # every launch spans the nodes: the ring's slowest hop is the NIC (dp and zero hold their
        # degrees within a node to `intra`), each launch pays the rendezvous
        beta = min(beta, a.inter_node_Bps)
        a = replace(a, torchrun_launch_s=a.torchrun_launch_s + a.rendezvous_s)
        profile = profile.with_overrides(nproc=profile.nproc * a.nodes)  # the stages see every node's ranks
    return PlanInputs(
        profile=profile,
        assume=a,
        gpus=profile.nproc,
        alpha_s=a.alpha_s,
        beta_Bps=beta,
        peak_flops=peak.bf16_dense_flops,
        gpus_per_node=per_node,
        intra_beta_Bps=intra,
    )


def estimate(
    profile: Profile,
    a: PlanAssumptions = PlanAssumptions(),
    rate_per_hour: float | None = None,
    setup: SetupAssumptions = SetupAssumptions(),
    only: tuple[str, ...] | None = None,
    tier: str = "",
) -> Plan:
    """Every stage's expected duration on `profile` (use its nproc as the GPU count), from its module's
    estimate(), between the set-up lines before and after (suite/plan/setup.py)."""
    inputs = plan_inputs(profile, a)
    plan_setup.check(setup)
    plan = Plan(
        profile=profile.name,
        gpus=inputs.gpus,
        gpu=gpu_for(a.gpu_name).model,
        alpha_s=inputs.alpha_s,
        beta_Bps=inputs.beta_Bps,
        nodes=a.nodes,
        rate_per_hour=rate_per_hour,
        before=plan_setup.before(setup),
        after=plan_setup.after(setup),
        tier=tier,
    )
    for name, declared in stages.REGISTRY.declared.items():
        if not stages.runs_on(name, profile.name) or (only is not None and name not in only):
            continue
        seconds, basis = declared.estimate(inputs)
        plan.stages.append(StageEstimate(name, float(seconds), basis))
    return plan


def _line(step: str, seconds: float, basis: str) -> str:
    return f"{step:<10} {seconds / 60:8.1f}  {basis}"


def render(plan: Plan) -> str:
    where = (
        f"{plan.nodes} nodes × {plan.gpus // plan.nodes} × {plan.gpu} ({plan.gpus} GPUs)"
        if plan.nodes > 1
        else f"{plan.gpus} × {plan.gpu}"
    )
    lines = [
        f"plan for {plan.profile} on {where}: α = {plan.alpha_s * 1e6:g} µs, "
        f"β = {plan.beta_Bps / 1e9:g} GB/s per direction"
        + (" (the inter-node hop)" if plan.nodes > 1 else ""),
        f"{'step':<10} {'minutes':>8}  basis",
    ]
    lines += [_line(s.step, s.seconds, s.basis) for s in plan.before]
    for s in plan.stages:
        lines.append(_line(s.stage, s.seconds, s.basis))
    total_min = plan.total_s / 60
    if plan.tier:
        from suite.plan.tiers import tier_line

        lines.append(tier_line(plan.tier, plan.total_s))
    lines.append(
        f"{'stages':<10} {total_min:8.1f}  = {plan.total_s / 3600:.2f} h of the host, "
        f"{plan.total_s / 3600 * plan.gpus:.1f} card-hours"
    )
    lines += [_line(s.step, s.seconds, s.basis) for s in plan.after]
    lines.append(
        f"{'billed':<10} {plan.billed_s / 60:8.1f}  set-up + stages + fetch = {plan.billed_s / 3600:.2f} h "
        f"of the host, what the renter pays for"
    )
    if plan.cost is not None:
        lines.append(f"cost at ${plan.rate_per_hour:g}/hour: ${plan.cost:.2f}")
    if plan.tier == "soak":  # a soak is as long as it is asked to be: no hour goal to hold it to
        return "\n".join(lines)
    lines.append(
        "fits the goal of one hour"
        if plan.fits_one_hour
        else f"OVER the one-hour goal by {total_min - 60:.1f} min: trim sweep sizes, iterations or degrees "
        f"in the profile"
    )
    return "\n".join(lines)
