"""The stage's folder: this declaration; beside it what only this stage runs (figure.py: its figures).
Imported by suite.stages' discovery (runner, plan, ingest, reports); it imports no other stage. Stage burnin —
every GPU runs the same seeded GEMM chain at full load for the tier's time; bits and speed judged.

    python -m suite run --stages burnin --profile nccl-gpu                 # 10 minutes (the standard tier)
    python -m suite run --tier soak --profile nccl-gpu                     # an hour; BURNIN_MIN=… for another
                                                                           # length
    python -m suite run --stages burnin --profile gloo-cpu                 # the rehearsal: the same code, 1 s
                                                                           # of it

One launch (suite/stages/burnin/worker.py): bf16 then fp32 (a quarter of the time), each chain started from
the same seeded inputs on every rank, its result's raw bits compared across ranks and repeats every repeat.
Silent data corruption is rare (about one device in a thousand) and rarely NaN/Inf: only comparing bits finds
it. A mismatch names the GPU (rank r is GPU r: the workers run in PCI bus order), the repeat and the first
differing element. Each GPU's sustained TFLOP/s is held against its peers' median and (bf16) against its SKU's
dense peak (suite/hardware/gpus.py; fp32 has no table figure, so peers only). Where determinism needs
settings, they are set and recorded: suite/stages/burnin/chain.py. On GPUs a sampler
(suite/hardware/gpu_sampler.py) records power, clocks, temperature and throttle reasons per GPU while the
chain runs; its rows carry `t`. After the chain, the HBM copy is held against the SKU's datasheet bandwidth
(rules.hbm_sku_verdict) and `ib_write_bw` runs per IB port from each GPU's nearest NIC
(suite/hardware/ib_bandwidth.py).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from suite.config import ConfigSection, Profile
from suite.context import StageContext
from suite.facts import Facts, gpu, gpu_model
from suite.hardware.card_fit import card_bytes
from suite.hardware.gpus import gpu_for, memory_bandwidth
from suite.results import Expectation, Row, Verdict
from suite.stage_contract import Stage
from suite.stages.burnin import rules
from suite.verdicts import judges_performance

NAME = "burnin"
DTYPES = ("bfloat16", "float32")


@dataclass(frozen=True, kw_only=True)
class BurninConfig:
    seconds: float = 600.0
    """The whole burn-in, both dtypes (the standard tier: 10 minutes; quick 2, soak 60 or BURNIN_MIN)."""
    n: int = 8192
    """Side of the square matrices (8192: 1.1 TFLOP a GEMM, ~1.5 ms on an H100 in bf16)."""
    links: int = 8
    """GEMMs per chain: one repeat (then one comparison) per chain."""
    fp32_share: float = 0.25
    """Share of `seconds` run in fp32 (without TF32: the FP32 units); the rest in bf16 (the tensor cores)."""
    window_s: float = 10.0
    """TFLOP/s is also reported per window of this many seconds: a GPU slowing as it heats shows in the
    figure."""
    seed: int = 20240611
    flip: str = ""
    """RANK:REPEAT:DTYPE:INDEX:BIT: one bit flipped in one rank's result (the drill proving the
    comparison)."""
    slow_rank: int = -1
    """A rank made slow on purpose (its chain 3× a repeat): the drill proving the peer rule."""
    sample_ms: int = 1000
    """The power/clock sampler's period on GPUs."""
    hbm_mib: int = 1024
    """HBM copy size per GPU (past L2: an H100's is 50 MB); 0 skips the memory and host-link phase."""
    copy_mib: int = 256
    """Pinned host↔device copy size per GPU, alone and all at once."""
    copy_iters: int = 4
    """Copies per timed window (HBM and host links)."""
    ib_seconds: float = 5.0
    """`ib_write_bw -D` per IB port after the chain (suite/hardware/ib_bandwidth.py); 0 runs none."""


CONFIG = ConfigSection(
    NAME,
    BurninConfig,
    {
        "gloo-cpu": BurninConfig(
            seconds=1.0,
            n=96,
            links=3,
            window_s=0.2,
            sample_ms=0,
            hbm_mib=1,
            copy_mib=1,
            copy_iters=1,
            ib_seconds=0.0,
        ),
        "nccl-gpu": BurninConfig(),
        "nccl-1gpu": BurninConfig(),
    },
)


def estimate(p) -> tuple[float, str]:
    """`make plan`'s seconds: the launch, the inputs drawn on the host and moved, the burn-in itself."""
    cfg: BurninConfig = p.profile.section(CONFIG)
    # seeded inputs drawn and moved once per dtype; the host links one GPU at a time
    setup_s = 10.0 + 2.0 * p.gpus
    ib_s = (cfg.ib_seconds + 2.0) * p.gpus if cfg.ib_seconds else 0.0  # at most a NIC per GPU, a pair each
    ib = f"; ib_write_bw {cfg.ib_seconds:g} s per IB port (≤ {p.gpus})" if ib_s else ""
    return p.assume.torchrun_launch_s + setup_s + cfg.seconds + ib_s, (
        f"one launch: the {cfg.links}-GEMM chain (n = {cfg.n}) on every GPU for {cfg.seconds / 60:g} min "
        f"({1 - cfg.fp32_share:.0%} bf16, {cfg.fp32_share:.0%} fp32), bits compared every repeat{ib}"
    )


def expect(profile: Profile, facts: Facts) -> list[Expectation]:
    model = gpu(facts)
    if profile.is_rehearsal or model is None or not model.bf16_dense_tflops:
        return []
    return [
        Expectation(
            stage=NAME,
            case="gemm",
            metric="tflops",
            dtype="bfloat16",
            unit="TFLOP/s",
            value=rules.SUSTAINED_PEAK_SHARE * model.bf16_dense_tflops,
            basis=f"{rules.SUSTAINED_PEAK_SHARE:.0%} of the {model.bf16_dense_tflops:g} TFLOP/s bf16 "
            f"dense peak ({model.model}: {model.peak_source})",
        )
    ]


def worker_args(cfg: BurninConfig) -> list[str]:
    return [
        "--n",
        str(cfg.n),
        "--links",
        str(cfg.links),
        "--seconds",
        str(cfg.seconds),
        "--dtypes",
        ",".join(DTYPES),
        "--fp32-share",
        str(cfg.fp32_share),
        "--seed",
        str(cfg.seed),
        "--window-s",
        str(cfg.window_s),
        "--flip",
        cfg.flip,
        "--slow-rank",
        str(cfg.slow_rank),
        "--hbm-bytes",
        str(cfg.hbm_mib << 20),
        "--copy-bytes",
        str(cfg.copy_mib << 20),
        "--copy-iters",
        str(cfg.copy_iters),
    ]


def run(profile: Profile, ctx: StageContext) -> list[Row]:
    from suite.hardware import fabric_counters as fabric
    from suite.hardware import gpu_sampler as sampler
    from suite.hardware import ib_bandwidth as ib
    from suite.stages.burnin.chain import WORKSPACE_CONFIG

    cfg: BurninConfig = profile.section(CONFIG)
    ctx.say(f"burn-in: {cfg.seconds:g} s of the GEMM chain on {profile.nproc} ranks")
    # PCI bus order: rank r is nvidia-smi's GPU r, so a mismatch names the GPU the sampler and -q describe;
    # the workspace setting must be in the environment before CUDA starts (cuBLAS's reproducibility condition)
    env = {**os.environ, "CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUBLAS_WORKSPACE_CONFIG": WORKSPACE_CONFIG}
    before = fabric.snapshot(ctx.raw_dir, "before")
    with sampler.sampling(ctx.raw_dir, NAME, period_ms=sampler.period_for(profile, cfg.sample_ms)) as samples:
        rows = ctx.torchrun(
            "suite.stages.burnin.worker", worker_args(cfg), tag="burnin", nproc=profile.nproc, env=env
        ).rows()
    rows += samples.rows()
    # after the chain: the ports' own figure, its errors counted below
    if cfg.ib_seconds and not profile.is_rehearsal:
        ib_rows = ib.measure(
            ib.read_ports(),
            ctx.facts.get("topology") or {},
            ctx.raw_dir,
            seconds=cfg.ib_seconds,
            stage=NAME,
            say=ctx.say,
        )
        ctx.keep(ib_rows)
        rows += ib_rows
    return rows + fabric.growth_rows(before, fabric.snapshot(ctx.raw_dir, "after"), stage=NAME)


def judge(rows: list[Row], expectations: list[Expectation], facts: Facts) -> list[Verdict]:
    from suite.hardware import fabric_counters as fabric
    from suite.hardware import gpu_sampler as sampler
    from suite.hardware import ib_bandwidth as ib

    on_gpu = judges_performance(facts)
    model = gpu(facts) or _model_from_rows(rows)
    out = [rules.sdc_verdict(rows, dtype, on_gpu=on_gpu) for dtype in DTYPES]
    out += [rules.peer_verdict(rows, dtype, on_gpu=on_gpu) for dtype in DTYPES]
    out.append(rules.peak_verdict(rows, model, on_gpu=on_gpu))
    out += rules.link_verdicts(rows, on_gpu=on_gpu)
    sheet = memory_bandwidth(model, gpu_model(facts) or getattr(model, "model", None), card_bytes(facts))
    out += [v for v in [rules.hbm_sku_verdict(rows, model, on_gpu=on_gpu, datasheet=sheet)] if v is not None]
    out += sampler.throttle_verdicts(rows, stage=NAME, on_gpu=on_gpu)
    out.append(fabric.fabric_verdict(rows, stage=NAME))
    out.append(ib.ib_verdict(rows, on_gpu=on_gpu, stage=NAME))
    return out


def _model_from_rows(rows: list[Row]):
    """The GPU model from the workers' device names, when topology's facts do not name one."""
    names = {(r.text or "").split(" (PCI")[0] for r in rows if r.case == "device" and r.metric == "device"}
    return gpu_for(names.pop()) if len(names) == 1 else None


def headline(rows: list[Row], verdicts: list[Verdict], expectations: list[Expectation]) -> str | None:
    """bf16 sustained TFLOP/s (median, slowest against it) and how many repeats were compared bit for bit."""
    from suite import headlines as hl

    bf16 = rules.values(rows, "gemm", "tflops", "bfloat16")
    if not bf16:
        return None
    found = rules.peer_shortfall(bf16)
    slowest = f", slowest {found[1]:.0%} below" if found else ""
    repeats = sum(r.value for r in hl.matching(rows, "gemm", "repeats"))
    bad = sum(r.value for r in rows if r.metric == "mismatched_repeats")
    return (
        f"bf16 {hl.number(hl.median(bf16.values()))} TFLOP/s sustained median of {len(bf16)}{slowest} · "
        f"{int(bad)} mismatching of {int(repeats)} repeats compared bit for bit"
    )


STAGE = Stage(
    row=16,
    after=("topology",),  # the GPU model (its bf16 peak) from facts["topology"]
    # one rented card can compute wrong too (repeats are compared)
    profiles=(
        "gloo-cpu",
        "nccl-gpu",
        "nccl-1gpu",
    ),
    title="seeded bf16/fp32 GEMM chain at full load for the tier's time: bits across GPUs and repeats, "
    "sustained TFLOP/s",
    measures="silent data corruption (bits across GPUs and repeats) and each GPU's sustained TFLOP/s against "
    "its peers "
    "and its SKU, under the tier's sustained load",
    wrong="any bit unlike the other GPUs' or its own earlier repeat; a GPU > 10 % below its peers' median (> "
    "25 % "
    "fails) or below half its bf16 peak; hardware slowdown, thermal or power-brake throttling; an HBM copy "
    "below "
    "70 % of the datasheet; an IB port's ib_write_bw below 80 % of its rate",
    rehearsal="the same chain on CPU ranks for 1 s: bits compared across ranks and repeats, the peer rule on "
    "CPU figures",
    config=CONFIG,
    estimate=estimate,
    expect=expect,
    run=run,
    judge=judge,
    headline=headline,
)
