"""The stage's folder: this declaration; beside it what only this stage runs (figure.py: its figures).
Imported by suite.stages' discovery (runner, plan, ingest, reports); it imports no other stage.
Stage cp — context parallelism: attention over a sequence split across ranks, checked, then timed.

    python -m suite run --stages cp --profile gloo-cpu      # CP = 2/4 on gloo: the golden comparison is real
    python -m suite run --stages cp --profile nccl-gpu      # CP = 2/4/8, bf16 timings, torch's
                                                            # context_parallel()

One launch (suite/stages/cp/worker.py). Ring attention (K/V rotated around the ranks with
batch_isend_irecv, partials merged by log-sum-exp) and Ulysses (all_to_all_single swapping sequence
and head sharding), written by hand, are compared elementwise with full attention in one process —
output, LSE, dq, dk, dv, causal and not — at every CP degree; on GPUs torch's own context_parallel()
against the same reference. The bytes each rank sends are counted and compared with the formula.
Then time per layer against sequence length, and whether the ring's rotation hides behind compute.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass

from suite.config import ConfigSection, Profile, ProfileError
from suite.context import StageContext
from suite.costmodel.drill_tolerance import attention_tolerance, lse_scale
from suite.costmodel.tolerance import CHECK_DTYPE, Tolerance
from suite.dtypes import DTYPE_BYTES
from suite.facts import Facts
from suite.facts import profile as profile_of
from suite.hardware.card_fit import card_bytes
from suite.hardware.stage_fit import cp_sized
from suite.results import Expectation, Row, Verdict
from suite.stage_contract import Stage
from suite.stages._parallel_ranks import subset_expectations, subset_note
from suite.verdicts import judges_performance, verdicts_for

NAME = "cp"
V = verdicts_for(NAME)
ALGOS = ("ring", "ulysses")
MASKS = ("full", "causal")
QUANTITIES = ("output", "lse", "dq", "dk", "dv")
HIDDEN_FLOOR = 0.8
"""On GPUs, at the longest sequence, at least this share of the ring's rotation must hide behind compute."""


@dataclass(frozen=True, kw_only=True)
class CpConfig:
    batch: int = 1
    """Sequences per batch."""
    heads: int = 16
    """Attention heads; every CP degree must divide them (Ulysses shards heads)."""
    head_dim: int = 64
    """Elements per head (D)."""
    golden_seq_len: int = 1024
    """Sequence length of the golden comparison (float32, against full attention in one process)."""
    seq_lens: tuple[int, ...] = (2048, 4096, 8192, 16384)
    """Sequence lengths timed."""
    degrees: tuple[int, ...] = (2, 4, 8)
    """CP degrees; those above the profile's nproc are left out."""
    reps: int = 10
    """Timed repetitions per case (after one warm-up)."""
    dtype: str = "bfloat16"
    """dtype of the timings (the golden comparison is float32)."""
    seed: int = 0
    """Seed of q, k, v and the upstream gradients (the same on every rank)."""

    def __post_init__(self) -> None:
        for d in self.degrees:
            if d < 2 or self.heads % d:
                raise ProfileError(
                    f"cp degree {d} must be ≥ 2 and divide cp.heads = {self.heads} (Ulysses shards heads)"
                )
            bad = [s for s in (self.golden_seq_len, *self.seq_lens) if s % d]
            if bad:
                raise ProfileError(
                    f"cp sequence lengths {bad} are not divisible by CP = {d}: pick multiples of {d}"
                )


CONFIG = ConfigSection(
    NAME,
    CpConfig,
    {
        "gloo-cpu": CpConfig(
            heads=4,
            head_dim=16,
            golden_seq_len=64,
            seq_lens=(64, 128),
            degrees=(2, 4),
            reps=1,
            dtype="float32",
        ),
        "nccl-gpu": CpConfig(),
    },
)


def degrees(profile: Profile) -> list[int]:
    ranks = profile.parallel_ranks  # a power of two: every degree ≤ it divides it (6 GPUs: CP = 2/4 on 4)
    return [d for d in profile.section(CONFIG).degrees if d <= ranks and ranks % d == 0]


def timed_lengths(profile: Profile, facts: dict) -> tuple[tuple[int, ...], str]:
    """(the timed sequence lengths whose scores fit the card at the smallest CP degree, what was dropped and
    why)."""
    cfg = profile.section(CONFIG)
    return cp_sized(cfg.seq_lens, card_bytes(facts), cfg.batch, cfg.heads, cfg.head_dim, degrees(profile))


def forward_bytes(algo: str, cfg: CpConfig, d: int, dtype_bytes: int = 4) -> int:
    """Bytes one rank sends in one forward at the golden length: ring (P−1) rotations of its K and V
    shards; Ulysses (P−1)/P of q, k, v, the output and the LSE (one value per query) shards."""
    shard = cfg.batch * cfg.heads * (cfg.golden_seq_len // d) * cfg.head_dim * dtype_bytes
    if algo == "ring":
        return (d - 1) * 2 * shard
    lse = cfg.batch * cfg.heads * (cfg.golden_seq_len // d) * 4
    return (4 * shard + lse) * (d - 1) // d


def tolerances(cfg: CpConfig, d: int) -> dict[str, Tolerance]:
    one = attention_tolerance(cfg.golden_seq_len, cfg.head_dim, d)
    return {
        q: dataclasses.replace(one, scale=lse_scale(cfg.golden_seq_len)) if q == "lse" else one
        for q in QUANTITIES
    }


def estimate(p) -> tuple[float, str]:
    """One launch: per degree and length, ring and Ulysses forward+backward and three ring forwards,
    (reps + 1) times; attention ≈ 4·B·H·S²·D FLOPs forward (×3 with backward), ÷ P per rank."""
    cfg = p.profile.section(CONFIG)
    seconds = p.assume.torchrun_launch_s
    for d in [d for d in cfg.degrees if d <= p.parallel_ranks]:
        for s in cfg.seq_lens:
            forward = 4 * cfg.batch * cfg.heads * s * s * cfg.head_dim / d / (p.peak_flops * p.assume.mfu)
            shard_bytes = cfg.batch * cfg.heads * s // d * cfg.head_dim * DTYPE_BYTES.get(cfg.dtype, 4)
            rotation = (d - 1) * p.collective_s("sendrecv", 2 * shard_bytes, d)
            seconds += (cfg.reps + 1) * (2 * 3 * forward + 3 * forward + 2 * rotation)
    return seconds, (
        f"CP = {'/'.join(str(d) for d in cfg.degrees if d <= p.parallel_ranks)}, S = "
        f"{'/'.join(map(str, cfg.seq_lens))}: 4·B·H·S²·D FLOPs per forward ÷ CP, one launch"
    )


def expect(profile: Profile, facts: Facts) -> list[Expectation]:
    cfg = profile.section(CONFIG)
    out = subset_expectations(NAME, profile, "CP (sequence shards)") if degrees(profile) else []
    if card_bytes(facts) is not None and degrees(profile):  # what the sweep was sized to on this card
        kept, sized = timed_lengths(profile, facts)
        out.append(
            Expectation(
                stage=NAME,
                case="sizing",
                metric="seq_len_max",
                value=float(max(kept, default=0)),
                unit="tokens",
                source="model",
                basis=sized,
            )
        )
    for d in degrees(profile):
        tols = tolerances(cfg, d)
        for algo in ALGOS:
            out += [
                Expectation(
                    stage=NAME,
                    case=f"{mask}.{q}",
                    metric="max_abs_error",
                    value=tols[q].bound,
                    unit="abs",
                    basis=f"at most {tols[q].describe()} (suite/costmodel/drill_tolerance.py)",
                    algo=algo,
                    world=d,
                    dtype=CHECK_DTYPE,
                )
                for mask in MASKS
                for q in QUANTITIES
            ]
            out.append(
                Expectation(
                    stage=NAME,
                    case="comm.forward",
                    metric="bytes_sent",
                    value=float(forward_bytes(algo, cfg, d)),
                    unit="bytes",
                    algo=algo,
                    world=d,
                    dtype=CHECK_DTYPE,
                    basis="ring: (P−1)·2·shard(K,V); Ulysses: (P−1)/P·(4 shards + LSE)",
                )
            )
        out.append(
            Expectation(
                stage=NAME,
                case="overlap",
                metric="rotation_hidden",
                value=1.0,
                unit="ratio",
                algo="ring",
                world=d,
                basis="ideal: the rotation entirely behind the block's compute",
            )
        )
    return out


def run(profile: Profile, ctx: StageContext) -> list[Row]:
    ds = degrees(profile)
    if not ds:  # a one-card box: nothing to split; judge() says so
        wanted = profile.section(CONFIG).degrees
        ctx.say(f"no CP degree of {wanted} fits {profile.nproc} processes: nothing to run")
        return []
    ctx.say(
        f"CP = {'/'.join(map(str, ds))}{subset_note(profile)}: ring and Ulysses vs full attention, then "
        f"timings "
        "(one launch)"
    )
    kept, sized = timed_lengths(profile, ctx.facts)
    if kept != profile.section(CONFIG).seq_lens:
        ctx.say(f"cp sweep sized: {sized}")
    cp = dataclasses.replace(profile.section(CONFIG), seq_lens=kept)
    args = ["--cp", json.dumps(dataclasses.asdict(cp)), "--degrees", ",".join(map(str, ds))]
    return ctx.torchrun("suite.stages.cp.worker", args, tag="cp", nproc=profile.parallel_ranks).rows()


def judge(rows: list[Row], expectations: list[Expectation], facts: Facts) -> list[Verdict]:
    profile = profile_of(facts)
    cfg = profile.section(CONFIG)
    out = []
    if not degrees(profile):
        return [
            V.skip(
                "golden",
                expected=f"CP = {'/'.join(map(str, cfg.degrees))} over the profile's processes",
                observed=f"{profile.nproc} processes",
                reason="no CP degree fits (each needs ≥ 2 processes "
                "dividing nproc): run with --nproc 2 or more to split a sequence",
            )
        ]
    for d in degrees(profile):
        for algo in ALGOS:
            out.append(golden_verdict(rows, algo, d, tolerances(cfg, d), QUANTITIES))
            out.append(volume_verdict(rows, algo, d, forward_bytes(algo, cfg, d)))
        if profile.device == "cuda":
            out.append(golden_verdict(rows, "torch_cp", d, tolerances(cfg, d), ("output", "dq", "dk", "dv")))
        else:
            out.append(
                V.skip(
                    f"golden.torch_cp.cp{d}",
                    expected="torch's context_parallel() equals full attention",
                    observed="not run on CPU",
                    reason="torch's public context_parallel() intercepts only "
                    "the CUDA SDPA kernels: on CPU it is not ring attention (FACTS.md)",
                )
            )
    out.append(overlap_verdict(rows, facts))
    return out


def golden_verdict(rows: list[Row], algo: str, d: int, tols: dict[str, Tolerance], quantities) -> Verdict:
    """Every (mask, quantity) compared and within its tolerance; a missing one fails too."""
    wanted = [f"{m}.{q}" for m in MASKS for q in quantities]
    found = {
        r.case: r
        for r in rows
        if r.metric == "max_abs_error" and r.algo == algo and r.world == d and r.case in wanted
    }
    missing = [c for c in wanted if c not in found]
    bad = {
        c: r
        for c, r in found.items()
        if not (math.isfinite(r.value) and r.value <= tols[c.split(".")[1]].bound)
    }
    worst = max(
        found.items(), key=lambda kv: kv[1].value if math.isfinite(kv[1].value) else math.inf, default=None
    )
    observed = (
        f"{len(found)} of {len(wanted)} compared; worst {worst[0]} {worst[1].value:.3g}"
        if worst
        else "no comparison rows"
    )
    errors = "; ".join(r.text for r in found.values() if r.text)
    return V.check(
        f"golden.{algo}.cp{d}",
        not missing and not bad,
        expected=f"max |CP − full attention| ≤ {tols['output'].describe()}; the LSE's ≤ "
        f"{tols['lse'].bound:.2g}",
        observed=observed + (f" ({errors})" if errors else ""),
        reason_ok=f"{algo} at CP={d} computes full attention, forward and backward, causal and not",
        reason_bad=(
            f"{algo} at CP={d}: "
            + (
                f"not compared: {', '.join(missing)} (see raw/cp/cp.rank0.log)"
                if missing
                else f"differs in {', '.join(bad)}: a wrong LSE merge, a causal mask not "
                f"offset for the shard's position, or a head/sequence axis swapped in the all-to-all"
            )
        ),
    )


def volume_verdict(rows: list[Row], algo: str, d: int, expected: int) -> Verdict:
    found = [
        r.value
        for r in rows
        if r.case == "comm.forward" and r.metric == "bytes_sent" and r.algo == algo and r.world == d
    ]
    observed = f"{found[0]:.0f} bytes" if found else "not counted"
    return V.check(
        f"comm_volume.{algo}.cp{d}",
        bool(found) and found[0] == expected,
        expected=f"{expected} bytes sent per rank per forward (the formula)",
        observed=observed,
        reason_ok="each rank sends exactly what the algorithm needs",
        reason_bad="the bytes sent differ from the formula: extra or missing transfers (see raw/cp/)",
    )


def overlap_verdict(rows: list[Row], facts: dict) -> Verdict:
    hidden = {
        (r.world, r.count): r.value for r in rows if r.case == "overlap" and r.metric == "rotation_hidden"
    }
    longest = {d: hidden[(d, s)] for d, s in hidden if s == max(s2 for d2, s2 in hidden if d2 == d)}
    observed = ", ".join(f"CP={d}: {h:.0%}" for d, h in sorted(longest.items())) or "not measured"
    expected = (
        f"≥ {HIDDEN_FLOOR:.0%} of the ring's K/V rotation hidden behind compute at the longest sequence"
    )
    if not judges_performance(facts):
        return V.cpu_skip("overlap", expected, observed)
    if not longest:
        return V.fail(
            "overlap", expected=expected, observed=observed, reason="no overlap rows: see raw/cp/cp.rank0.log"
        )
    ok = all(math.isfinite(h) and h >= HIDDEN_FLOOR for h in longest.values())
    return V.check(
        "overlap",
        ok,
        expected=expected,
        observed=observed,
        bad="warn",
        reason_ok="the rotation rides behind the block computations",
        reason_bad="the rotation is exposed: the next K/V transfer is not overlapping the block's matmuls "
        "(check NCCL's stream use, or the blocks are too short at this length)",
    )


def headline(rows: list[Row], verdicts: list[Verdict], expectations: list[Expectation]) -> str | None:
    """Ring attention and Ulysses against full attention: the worst error as a share of its tolerance, the
    bytes each rank sent against the formula, and (where judged) the share of the ring's K/V rotation
    hidden."""
    from suite import headlines as hl

    golden = hl.passed(verdicts, "cp.golden.")
    if not golden:
        return None
    worst = hl.worst_ratio(rows, expectations, "max_abs_error", "algo", "world")
    degrees = sorted({r.world for r in rows if r.metric == "max_abs_error" and r.world})
    text = f"CP={','.join(map(str, degrees))}: {golden} equal full attention" + (
        f" (worst {worst:.2g}× tolerance)" if worst == worst else ""
    )
    volume = hl.passed(verdicts, "cp.comm_volume.")
    if volume:
        text += f" · bytes sent = formula {volume}"
    overlap = hl.verdict(verdicts, "cp.overlap")
    if overlap and overlap.status != "skip":
        text += f" · K/V rotation hidden {overlap.observed} · expected ≥ {HIDDEN_FLOOR:.0%}"
    return text


STAGE = Stage(
    row=13,
    after=("bandwidth",),  # runs with the other drills, after the collectives are known to work
    title="ring attention and Ulysses at CP = 2/4/8: time vs sequence length",
    measures="time per attention layer vs sequence length, bytes per rank, K/V rotation hidden behind "
    "compute",
    wrong="K/V rotation not hidden behind compute; any golden difference beyond the tolerance",
    rehearsal="ring and Ulysses at CP = 2/4: output, LSE and dq/dk/dv vs full attention, causal and not",
    config=CONFIG,
    estimate=estimate,
    expect=expect,
    run=run,
    judge=judge,
    headline=headline,
)
