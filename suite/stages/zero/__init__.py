"""The stage's folder: this declaration; beside it what only this stage runs (figure.py: its figures).
Imported by suite.stages' discovery (runner, plan, ingest, reports); it imports no other stage.
Stage 8 — zero: plain DDP and ZeRO-1/2/3 (torch's ZeroRedundancyOptimizer and FSDP2) over every rank.

    python -m suite run --stages zero --profile nccl-gpu
    python -m suite run --stages zero --profile gloo-cpu     # parameters equal single-process AdamW

One launch (suite/stages/zero/worker.py) runs DDP (ZeRO 0, the reference point), ZeRO-1 (DDP +
ZeroRedundancyOptimizer), ZeRO-2 (FSDP2, reshard_after_forward=False) and ZeRO-3 (True) in turn:
peak memory per rank, model-state bytes held after a step, step time, and the parameters after
warm-up + timed AdamW steps compared elementwise with one process on the same global batches.
Beside the measured memory: the model's bytes per rank, 16Ψ for DDP in float32 (8Ψ in bf16 with
AdamW's state in bf16) down to 16Ψ/N for ZeRO-3.

On a multi-node profile the launch spans every node and each ZeRO stage runs at nproc (node 0 alone, as on
one node) and at every degree spanning whole nodes (Profile.zero_degrees); each of those degrees also gets an
α-β step time, t₁/d + ZeRO's 1–1.5 all-reduces of the parameters unoverlapped, with the inter-node fit
(suite/facts.py alpha_beta_at), and the verdicts say which degree crossed nodes and which β it was held to.
"""

from __future__ import annotations

import dataclasses

from suite import headlines as hl
from suite.config import Profile
from suite.context import StageContext
from suite.costmodel.alphabeta import zero_step_comm_s
from suite.costmodel.scaling_expectations import DP_MARGIN, ZERO3_SLOWDOWN, model_state_bytes
from suite.costmodel.sizing import parameter_count
from suite.costmodel.tolerance import CHECK_DTYPE, golden_tolerance
from suite.dtypes import DTYPE_BYTES
from suite.facts import Facts, alpha_beta_at, baseline_step_s
from suite.facts import profile as profile_of
from suite.hardware.stage_fit import scaling_dp_model
from suite.results import Expectation, Row, Verdict
from suite.stage_contract import Stage
from suite.stages._across_nodes import NETWORK_HINT, NODES_METRIC, held_to, nodes_verdict, ranks_label
from suite.stages._golden import golden_verdicts, tolerance_after_training
from suite.stages._parallel_ranks import subset_expectations, subset_note
from suite.values import is_finite_number
from suite.verdicts import judges_performance, verdicts_for

NAME = "zero"

CONFIG = None  # the profile's `model`


def estimate(p) -> tuple[float, str]:
    """`make plan`'s minutes for this stage (p: suite.plan.hours.PlanInputs): on one node every card; across
    nodes one node's cards (the intra-node β), then each whole-node degree (the inter-node β)."""
    degrees = p.zero_degrees
    seconds = sum(
        p.assume.torchrun_launch_s + p.steps * (p.dp_step_s / n + p.zero_comm_s(z, n))
        for n in degrees
        for z in (1, 2, 3)
    )
    where = (
        f"{degrees[0]} cards" if len(degrees) == 1 else f"{'/'.join(map(str, degrees))} cards (across nodes)"
    )
    return seconds, f"ZeRO-1/2/3 on {where}: 1, 1, 1.5 all-reduces of the parameters per step"


ZERO_STAGES = (0, 1, 2, 3)
NAMES = {0: "DDP", 1: "ZeRO-1", 2: "ZeRO-2", 3: "ZeRO-3"}


def expect(profile: Profile, facts: Facts) -> list[Expectation]:
    cfg = scaling_dp_model(profile, facts)  # sized to the card (suite/hardware/stage_fit.py)
    golden = golden_tolerance(cfg, cfg.warmup_steps + cfg.steps)  # the check's steps
    params = parameter_count(cfg)
    step_1 = baseline_step_s(facts)
    across = len(profile.nodes) > 1
    out = subset_expectations(NAME, profile, "ZeRO (the batch and the state shards)")
    for n in profile.zero_degrees:
        for z in ZERO_STAGES:
            out.append(
                Expectation(
                    stage=NAME,
                    case="params_after_training",
                    metric="max_abs_error",
                    value=golden.bound,
                    unit="abs",
                    world=n,
                    zero=z,
                    dtype=CHECK_DTYPE,
                    basis=f"at most {golden.describe()} (suite/costmodel/tolerance.py)",
                )
            )
            out.append(
                Expectation(
                    stage=NAME,
                    case="train_step",
                    metric="state_memory_bytes",
                    value=model_state_bytes(params, n, z, cfg.dtype),
                    unit="bytes",
                    world=n,
                    zero=z,
                    dtype=cfg.dtype,
                    basis=f"Ψ = {params:,} parameters; {cfg.dtype} parameters, "
                    f"gradients and AdamW moments; {NAMES[z]} over {n} ranks",
                )
            )
            # across nodes: the α-β step time each degree is held to (zero.across_nodes)
            if across and step_1:
                out.append(
                    _step_expectation(profile, facts, step_1 * cfg.batch / profile.model.batch, params, n, z)
                )
    return out


def _step_expectation(
    profile: Profile, facts: dict, step_1: float, params: int, n: int, z: int
) -> Expectation:
    """t₁/n + ZeRO stage z's all-reduce equivalents of the parameters (unoverlapped: an upper bound)."""
    cfg = scaling_dp_model(profile, facts)  # sized to the card (suite/hardware/stage_fit.py)
    ab = alpha_beta_at(facts, profile, n)
    param_bytes = params * DTYPE_BYTES[cfg.dtype]
    value = step_1 / n + zero_step_comm_s(z, param_bytes, n, ab.alpha_s, ab.beta_Bps)
    return Expectation(
        stage=NAME,
        case="train_step",
        metric="step_time_s",
        value=value,
        unit="s",
        world=n,
        zero=z,
        dtype=cfg.dtype,
        basis=f"one rank's step {step_1 * 1e3:.3g} ms ÷ {n} + {NAMES[z]}'s "
        f"communication of {param_bytes / 1e6:.4g} MB unoverlapped, "
        f"{ranks_label(profile, n)}; {ab.source}",
    )


def run(profile: Profile, ctx: StageContext) -> list[Row]:
    from suite.workloads.worker_cli import model_args

    args = [*model_args(scaling_dp_model(profile, ctx.facts)), "--stages", "0,1,2,3"]
    if len(profile.nodes) > 1:  # every node's ranks; node 0 alone first, then each whole-node degree
        degrees = ",".join(map(str, profile.zero_degrees))
        ctx.say(
            f"DDP, ZeRO-1, ZeRO-2, ZeRO-3 over {degrees} ranks ({profile.nproc} per node on "
            f"{len(profile.nodes)} nodes): reference, then each degree and stage"
        )
        args += ["--degrees", degrees, "--record-nodes"]
    else:
        ctx.say(
            f"DDP, ZeRO-1, ZeRO-2, ZeRO-3 over {profile.parallel_ranks} ranks{subset_note(profile)}: "
            f"reference, "
            "then each stage"
        )
        return ctx.torchrun("suite.stages.zero.worker", args, tag="zero", nproc=profile.parallel_ranks).rows()
    return ctx.torchrun("suite.stages.zero.worker", args, tag="zero").rows()


VERDICTS = verdicts_for(NAME)


def judge(rows: list[Row], expectations: list[Expectation], facts: Facts) -> list[Verdict]:
    profile = profile_of(facts)
    across = len(profile.nodes) > 1
    tol = tolerance_after_training(facts, scaling_dp_model(profile, facts))
    if across:  # node 0's degree under the single-node ids; each cross-node degree under .world<d>
        out = [
            v
            for n in profile.zero_degrees
            for v in golden_verdicts(
                NAME,
                rows,
                tol,
                "zero",
                ZERO_STAGES,
                lambda z, n=n: f"{NAMES[z]} over {ranks_label(profile, n)}",
                where={"world": n},
                suffix="" if n == profile.nproc else f".world{n}",
            )
        ]
        out += nodes_verdict(NAME, rows, profile)
    else:
        out = [_named(v) for v in golden_verdicts(NAME, rows, tol, "zero", ZERO_STAGES, "{key}")]
    degrees = profile.zero_degrees if across else (None,)
    steps = {n: _metric(rows, "step_time_s", n) for n in degrees}
    peaks = {n: _metric(rows, "peak_memory_bytes", n) for n in degrees}
    expected_time = f"ZeRO-3 step ≤ {ZERO3_SLOWDOWN}× DDP's"
    observed_time = _per_degree(profile, steps, lambda z, t: f"{NAMES[z]} {t * 1e3:.3g} ms")
    expected_mem = "peak memory per rank falling as the ZeRO stage rises"
    cross = _cross_node_verdict(rows, expectations, facts, profile)  # [] on one node
    observed_mem = _per_degree(profile, peaks, lambda z, b: f"{NAMES[z]} {b / 2**20:.3g} MiB")
    if not judges_performance(facts):
        return out + [
            VERDICTS.cpu_skip("zero3_time", expected_time, observed_time),
            VERDICTS.cpu_skip("memory", expected_mem, observed_mem),
            *cross,
        ]
    ratios = {n: s[3] / s[0] for n, s in steps.items() if 0 in s and 3 in s}
    if ratios:
        slow = [n for n, r in ratios.items() if r > ZERO3_SLOWDOWN]
        out.append(
            VERDICTS.check(
                "zero3_time",
                not slow,
                bad="warn",
                expected=expected_time,
                observed=_per_degree(
                    profile, {n: {0: r} for n, r in ratios.items()}, lambda z, r: f"{r:.2f}×"
                )
                + f" ({observed_time})",
                reason_ok="ZeRO-3's parameter gathering hides behind compute",
                reason_bad="ZeRO-3's parameter all-gathers are not overlapping the forward/backward"
                + (f" at {', '.join(ranks_label(profile, n) for n in slow)}" if across else "")
                + ": check FSDP2 prefetching, the interconnect (bandwidth stage), and the per-rank batch "
                "size",
            )
        )
    else:
        out.append(
            VERDICTS.skip(
                "zero3_time",
                expected=expected_time,
                observed=observed_time or "no step times",
                reason="DDP or ZeRO-3 did not run",
            )
        )
    rising = [
        (n, a, b)
        for n, p in peaks.items()
        for a, b in zip(ZERO_STAGES, ZERO_STAGES[1:])
        if a in p and b in p and p[b] >= p[a]
    ]
    out.append(
        VERDICTS.check(
            "memory",
            not rising,
            bad="warn",
            expected=expected_mem,
            observed=observed_mem,
            reason_ok="each ZeRO stage holds less per rank",
            reason_bad="not falling from "
            + ", ".join(
                f"{NAMES[a]} to {NAMES[b]}" + (f" at {ranks_label(profile, n)}" if across else "")
                for n, a, b in rising
            )
            + ": activations may dominate the model state at this size, or a stage keeps unsharded "
            "copies (DDP buckets, FSDP2 reshard_after_forward)",
        )
    )
    return out + cross


def _cross_node_verdict(
    rows: list[Row], expectations: list[Expectation], facts: dict, profile: Profile
) -> list[Verdict]:
    """On a multi-node profile: each degree spanning nodes no slower than DP_MARGIN of its α-β step time (held
    to the inter-node β); [] on one node."""
    crossing = profile.cross_node_degrees
    if len(profile.nodes) <= 1 or not crossing:
        return []
    expected = (
        f"step time ≤ the α-β step ÷ {DP_MARGIN:.0%} at every degree spanning nodes "
        f"({held_to(facts, profile, crossing)})"
    )
    predicted = {(e.world, e.zero): e.value for e in expectations if e.metric == "step_time_s"}
    measured = {(n, z): t for n in crossing for z, t in _metric(rows, "step_time_s", n).items()}
    observed = (
        "; ".join(
            f"{ranks_label(profile, n)}: "
            + ", ".join(
                f"{NAMES[z]} {measured[(n, z)] * 1e3:.3g} ms"
                + (f" (α-β {predicted[(n, z)] * 1e3:.3g})" if (n, z) in predicted else "")
                for z in ZERO_STAGES
                if (n, z) in measured
            )
            for n in crossing
        )
        or "no step times across nodes"
    )
    if not judges_performance(facts):
        return [VERDICTS.cpu_skip("across_nodes", expected, observed)]
    if not predicted:
        return [
            VERDICTS.skip(
                "across_nodes",
                expected=expected,
                observed=observed,
                reason="no baseline step time to predict from: rerun the baseline stage first",
            )
        ]
    slow = [k for k in sorted(measured) if k in predicted and measured[k] * DP_MARGIN > predicted[k]]
    return [
        VERDICTS.check(
            "across_nodes",
            not slow,
            bad="warn",
            expected=expected,
            observed=observed,
            reason_ok="across nodes every ZeRO stage is as fast as the inter-node β allows",
            reason_bad=f"{', '.join(f'{NAMES[z]} at {ranks_label(profile, n)}' for n, z in slow)} slower "
            f"than the "
            f"inter-node β explains: check {NETWORK_HINT} and FSDP2's prefetching",
        )
    ]


def _per_degree(profile: Profile, values: dict, text) -> str:
    """'DDP 12 ms, ZeRO-3 15 ms' on one node; '2 ranks: …; 4 ranks across 2 nodes: …' across nodes."""
    parts = []
    for n, by_zero in values.items():
        body = ", ".join(text(z, v) for z, v in sorted(by_zero.items()))
        parts.append(body if n is None else f"{ranks_label(profile, n)}: {body}")
    return "; ".join(p for p in parts if p and not p.endswith(": "))


def _metric(rows: list[Row], metric: str, world: int | None = None) -> dict[int, float]:
    return {
        r.zero: r.value
        for r in rows
        if r.case == "train_step"
        and r.metric == metric
        and is_finite_number(r.value)
        and (world is None or r.world == world)
    }


def _named(v: Verdict) -> Verdict:
    """golden.zero<k> verdicts name the stage as a person says it."""
    z = int(v.id.rsplit("zero", 1)[1])
    return dataclasses.replace(v, reason=v.reason.replace(f"{z} trains", f"{NAMES[z]} trains"))


def headline(rows: list[Row], verdicts: list[Verdict], expectations: list[Expectation]) -> str | None:
    """The highest ZeRO stage's step time and model-state memory, each as a multiple of plain DDP (zero 0), at
    the largest degree measured (across how many nodes, where it crossed)."""
    timed = hl.last(rows, "train_step", "step_time_s", key="world")
    world = timed.world if timed is not None else None
    steps = {
        r.zero: r.value
        for r in hl.matching(rows, "train_step", "step_time_s", world=world)
        if r.zero is not None
    }
    state = {
        r.zero: r.value
        for r in hl.matching(rows, "train_step", "state_memory_bytes", world=world)
        if r.zero is not None
    }
    top = max(steps, default=None)
    if top is None or not steps.get(0) or top == 0:
        return None
    text = f"ZeRO-{top} step {hl.times(steps[top] / steps[0])} DDP"
    if state.get(0) and top in state:
        text += f", model-state memory {hl.times(state[top] / state[0])} DDP"
    spanned = [r for r in hl.matching(rows, "train_step", NODES_METRIC, world=world) if r.value > 1]
    return text + (f" at {world} ranks across {spanned[0].value:.0f} nodes" if spanned else "")


STAGE = Stage(
    row=8,
    after=("bandwidth", "baseline"),
    title="ZeRO-1/2/3 (ZeroRedundancyOptimizer, FSDP2)",
    measures="memory per rank and time per step under DDP, ZeRO-1, ZeRO-2 and ZeRO-3",
    wrong="ZeRO-3 more than 1.5× slower than DDP; memory per rank not falling as the ZeRO stage rises",
    rehearsal="all three stages and DDP on gloo; parameters after N AdamW steps equal single-process AdamW",
    config=CONFIG,
    estimate=estimate,
    expect=expect,
    run=run,
    judge=judge,
    headline=headline,
)
