"""Before renting: how long every stage will take on the GPU profile, and what the hours cost.

    python -m suite plan --profile nccl-gpu --gpus 8 --rate 24      # make plan RATE=24

Pure arithmetic from the profile (sweep sizes, iterations, model size, steps), the α-β model
(suite/costmodel/alphabeta.py) with β at the GPU's link peak, the GPU's bf16 peak (suite/gpus.py)
at an assumed MFU, and a few fixed costs a GPU node always pays (named in PlanAssumptions, each
with its reason). The goal it is held to: the whole checklist inside one hour of card time.

Collective time on the bus: one nccl-tests size costs (warmup + iters) × 2 placements (out of
place, in place) × t(S), with t from the α-β model; e.g. all_reduce of 8 GiB over 8 H100s,
α = 5 µs, β = 450 GB/s: 2·7·(5 µs + 8.59e9 B / (8 · 450e9 B/s)) = 33.5 ms, × 25 × 2 = 1.7 s.
Training step: FLOPs/token × tokens/step ÷ (peak × MFU); the model's communication is added per
strategy (TP: 4 activation all-reduces per layer; DP: one gradient all-reduce; ZeRO: 1–1.5 of them).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .config import Profile
from .costmodel import alphabeta as ab
from .dtypes import DTYPE_BYTES
from .gpus import gpu_for

# nccl-tests binaries the bandwidth stage runs (CHECKLIST row 2), as alphabeta names them.
BANDWIDTH_COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "sendrecv")
ONE_HOUR_S = 3600.0


@dataclass(frozen=True, kw_only=True)
class PlanAssumptions:
    """What the estimate assumes beyond the profile; each can be changed on the command line."""

    gpu_name: str = "NVIDIA H100 80GB HBM3"
    """The GPU the box is rented with (picks the link peak and the bf16 peak)."""
    alpha_s: float = 5e-6
    """Per-step latency of one collective step, s (CHECKLIST.md's worked example)."""
    beta_Bps: float | None = None
    """Per-step bandwidth, bytes/s; None: the GPU's NVLink peak per direction (H100: 18 × 25 GB/s = 450 GB/s)."""
    mfu: float = 0.35
    """Model FLOPs utilisation assumed for the training-step time (0.3–0.45 is typical for a model this size)."""
    torchrun_launch_s: float = 25.0
    """One torchrun launch on a GPU node: import torch ~2 s, CUDA context ~3 s per process, NCCL init, model build."""
    nccl_tests_launch_s: float = 8.0
    """One nccl-tests *_perf start: mpirun, communicator init, buffer allocation and validation set-up."""
    topology_s: float = 20.0
    """nvidia-smi -q and topo -m on every GPU, NUMA facts, versions."""
    nsys_export_s: float = 90.0
    """nsys profile's finalisation plus `nsys export --type sqlite` of 8 reports."""
    torchrun_restart_wait_s: float = 30.0
    """torchrun waits this long before SIGKILLing a stopped worker (FACTS.md)."""


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
    stages: list[StageEstimate] = field(default_factory=list)
    rate_per_hour: float | None = None

    @property
    def total_s(self) -> float:
        return sum(s.seconds for s in self.stages)

    @property
    def cost(self) -> float | None:
        return None if self.rate_per_hour is None else self.total_s / 3600.0 * self.rate_per_hour

    @property
    def fits_one_hour(self) -> bool:
        return self.total_s <= ONE_HOUR_S


def sweep_time_s(collective: str, sizes: list[int], n: int, alpha_s: float, beta_Bps: float, repeats: int,
                 placements: int = 2, algo: str = "ring") -> float:
    """Bus time of one sweep: Σ over sizes of repeats × placements × t(S)."""
    return sum(repeats * placements * ab.collective_time_s(collective, s, n, alpha_s, beta_Bps, algo=algo) for s in sizes)


def step_compute_s(profile: Profile, peak_flops: float, mfu: float) -> float:
    """One training step of the whole global batch on one card: FLOPs/token × tokens ÷ (peak × MFU)."""
    from .workloads.gpt import training_flops_per_token

    m = profile.model
    return training_flops_per_token(m) * m.batch * m.seq_len / (peak_flops * mfu)


def estimate(profile: Profile, a: PlanAssumptions = PlanAssumptions(), rate_per_hour: float | None = None) -> Plan:
    """Every stage's expected duration on `profile` (use its nproc as the GPU count)."""
    from .workloads.gpt import parameter_count

    n = profile.nproc
    peak = gpu_for(a.gpu_name)
    link_GBps = (peak.nvlink_full_GBps or peak.pcie_x16_GBps) if peak else None  # a switched board's NVLink, else PCIe
    if a.beta_Bps is None and link_GBps is None:
        raise ValueError(f"GPU {a.gpu_name!r} has no known link peak: pass --beta (bytes/s) or a known --gpu")
    beta = a.beta_Bps if a.beta_Bps is not None else link_GBps * 1e9
    if peak is None or peak.bf16_dense_flops is None:
        raise ValueError(f"GPU {a.gpu_name!r} has no known bf16 peak: pass a known --gpu (e.g. H100, A100, B200)")
    alpha = a.alpha_s
    sw = profile.sweep
    sizes = sw.sizes()
    repeats = sw.warmup_iters + sw.iters
    m = profile.model
    dtype_bytes = DTYPE_BYTES.get(m.dtype, 4)
    params = parameter_count(m)
    grad_bytes = params * dtype_bytes
    step1 = step_compute_s(profile, peak.bf16_dense_flops, a.mfu)
    steps = m.warmup_steps + m.steps
    plan = Plan(profile=profile.name, gpus=n, gpu=peak.model, alpha_s=alpha, beta_Bps=beta, rate_per_hour=rate_per_hour)
    add = plan.stages.append

    add(StageEstimate("topology", a.topology_s, "nvidia-smi -q, topo -m, NUMA facts: a fixed cost"))

    nccl = sum(a.nccl_tests_launch_s + sweep_time_s(c, sizes, n, alpha, beta, repeats) for c in BANDWIDTH_COLLECTIVES)
    torch_sweep = a.torchrun_launch_s + sum(sweep_time_s(c, sizes, n, alpha, beta, repeats, placements=1)
                                            for c in BANDWIDTH_COLLECTIVES)
    add(StageEstimate("bandwidth", nccl + torch_sweep,
                      f"{len(BANDWIDTH_COLLECTIVES)} nccl-tests × {len(sizes)} sizes {sizes[0]} B–{sizes[-1] / 2**30:g} GiB "
                      f"× {repeats} iterations × 2 placements, plus the torch sweep"))

    cross = sum(a.nccl_tests_launch_s + sweep_time_s("all_reduce", sizes, n, alpha, beta, repeats, algo=algo)
                for algo in ("ring", "tree"))
    add(StageEstimate("crossover", cross, "the all_reduce sweep twice: NCCL_ALGO=Ring, then Tree"))

    add(StageEstimate("baseline", a.torchrun_launch_s + steps * step1,
                      f"{steps} steps × {step1 * 1e3:.0f} ms on one card ({params / 1e6:.0f} M parameters, MFU {a.mfu:.0%})"))

    act_bytes = m.batch * m.seq_len * m.hidden * dtype_bytes
    tp = sum(a.torchrun_launch_s + steps * (step1 / d + 4 * m.layers * ab.collective_time_s("all_reduce", act_bytes, d, alpha, beta))
             for d in profile.degrees)
    add(StageEstimate("tp", tp, f"TP = {'/'.join(map(str, profile.degrees))}: compute ÷ TP + 4 activation all-reduces per layer"))

    dp = sum(a.torchrun_launch_s + steps * (step1 / d + ab.dp_step_comm_s(grad_bytes, d, alpha, beta)) for d in profile.degrees)
    add(StageEstimate("dp", dp, f"DP = {'/'.join(map(str, profile.degrees))}: compute ÷ DP + one gradient all-reduce "
                                f"({grad_bytes / 1e9:.2f} GB)"))

    zero = sum(a.torchrun_launch_s + steps * (step1 / n + ab.zero_step_comm_s(z, grad_bytes, n, alpha, beta)) for z in (1, 2, 3))
    add(StageEstimate("zero", zero, f"ZeRO-1/2/3 on {n} cards: 1, 1, 1.5 all-reduces of the parameters per step"))

    comm = ab.dp_step_comm_s(grad_bytes, n, alpha, beta)
    overlap = 2 * a.torchrun_launch_s + steps * ((step1 / n + comm) + max(step1 / n, comm))
    add(StageEstimate("overlap", overlap, "DDP without overlap (compute + comm), then with (max of the two)"))

    f = profile.fault
    step_n = step1 / n + comm
    detect = {"crash": 1.0, "exception": 1.0, "hang": f.pg_timeout_s + a.torchrun_restart_wait_s}
    fault = sum(2 * a.torchrun_launch_s + f.steps * step_n + detect.get(s, f.pg_timeout_s) for s in f.scenarios)
    add(StageEstimate("fault", fault, f"{len(f.scenarios)} drills × (launch, restart, {f.steps} steps); "
                                      f"a hang costs the {f.pg_timeout_s:.0f} s process-group timeout + {a.torchrun_restart_wait_s:.0f} s"))

    add(StageEstimate("profile", a.torchrun_launch_s + steps * step_n + a.nsys_export_s,
                      f"nsys over {steps} DDP steps + export of every rank's report"))
    return plan


def render(plan: Plan) -> str:
    lines = [f"plan for {plan.profile} on {plan.gpus} × {plan.gpu}: α = {plan.alpha_s * 1e6:g} µs, "
             f"β = {plan.beta_Bps / 1e9:g} GB/s per direction",
             f"{'stage':<10} {'minutes':>8}  basis"]
    for s in plan.stages:
        lines.append(f"{s.stage:<10} {s.seconds / 60:8.1f}  {s.basis}")
    total_min = plan.total_s / 60
    lines.append(f"{'total':<10} {total_min:8.1f}  = {plan.total_s / 3600:.2f} h of the host, "
                 f"{plan.total_s / 3600 * plan.gpus:.1f} card-hours")
    if plan.cost is not None:
        lines.append(f"cost at ${plan.rate_per_hour:g}/hour: ${plan.cost:.2f}")
    lines.append("fits the goal of one hour" if plan.fits_one_hour else
                 f"OVER the one-hour goal by {total_min - 60:.1f} min: trim sweep sizes, iterations or degrees in the profile")
    return "\n".join(lines)
