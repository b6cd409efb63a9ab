"""The stage's folder: this declaration; beside it what only this stage runs (figure.py: its figures).
Imported by suite.stages' discovery (runner, plan, ingest, reports); it imports no other stage. The memory
budget of one card: model state, activations per block, checkpointing, the largest batch, fragmentation.

    python -m suite run --stages memory --profile nccl-1gpu    # the caching allocator's own numbers on cuda:0
    python -m suite run --stages memory --profile gloo-cpu     # torch's MemTracker on CPU; the search under a
                                                               # cap

Runs in the stage's own process (suite/stages/memory/worker.py). Every measured term is checked against
suite/costmodel/memory_formula.py (16Ψ of mixed-precision AdamW state; 42·s·b·h + … bytes per block, derived
op by op; 4·s·b·h with checkpointing). The batch search must converge (largest fit + 1 = first failure), agree
with the linear extrapolation from its own first two tries, and leave live memory where each try found it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from suite.config import ConfigSection, GptConfig, Profile
from suite.context import StageContext
from suite.costmodel.memory_formula import (
    ACTIVATION_FORMULA,
    CHECKPOINT_FORMULA,
    STATE_FORMULA,
    activation_bytes_per_layer,
    korthikanti_bytes_per_layer,
    state_bytes,
)
from suite.costmodel.sizing import parameter_count
from suite.facts import Facts, profile_or_none
from suite.hardware.card_fit import card_bytes, headroom_text, usable_bytes
from suite.results import Expectation, Row, Verdict
from suite.stage_contract import Stage
from suite.verdicts import verdicts_for

NAME = "memory"

V = verdicts_for(NAME)


@dataclass(frozen=True, kw_only=True)
class MemoryConfig:
    vocab: int = 128
    """The measured GPT's vocabulary, tokens (its shape: suite/workloads/gpt.py; fp32 parameters, bf16
    autocast)."""
    hidden: int = 64
    """Hidden size h."""
    heads: int = 4
    """Attention heads a."""
    seq_len: int = 32
    """Tokens per sequence s."""
    batch: int = 4
    """Sequences b of the activation measurement."""
    search_layers: int = 2
    """Blocks of the model whose state is measured and whose largest batch is searched."""
    search_max_batch: int = 1024
    """Largest batch the search tries, sequences."""
    budget_gib: float = 0.0
    """CUDA: cap this process at this many GiB (a smaller card's memory; 0 = the whole card)."""
    cpu_headroom_bytes: int = 2 * 2**20
    """CPU: the imposed cap, bytes above the model state."""
    state_tolerance: float = 0.01
    """Largest |measured / formula − 1| of parameters, gradients and AdamW state."""
    activation_tolerance: float = 0.02
    """Largest |measured / formula − 1| of the activations (the allocator rounds to 512 B on CUDA)."""
    search_tolerance: float = 0.15
    """Largest |largest batch / the linear prediction − 1|."""
    fragmentation_warn: float = 0.30
    """Warn when 1 − allocated / reserved at the peak exceeds this."""

    def model(self, layers: int) -> GptConfig:
        return GptConfig(
            vocab=self.vocab,
            hidden=self.hidden,
            heads=self.heads,
            layers=layers,
            seq_len=self.seq_len,
            batch=self.batch,
            dtype="float32",
        )


ONE_CARD = MemoryConfig(
    vocab=32768,
    hidden=1024,
    heads=16,
    seq_len=1024,
    batch=2,
    search_layers=8,
    budget_gib=16.0,
    activation_tolerance=0.05,
)
CONFIG = ConfigSection(
    "memory", MemoryConfig, {"gloo-cpu": MemoryConfig(), "nccl-gpu": ONE_CARD, "nccl-1gpu": ONE_CARD}
)


def estimate(p) -> tuple[float, str]:
    mc = p.profile.section(CONFIG)
    tries = 2 * max(1, math.ceil(math.log2(mc.search_max_batch)))
    return 20.0 + tries * 3.0, f"state, 4 activation forwards, ≤ {tries} batch tries (~3 s each)"


def expect(profile: Profile, facts: Facts) -> list[Expectation]:
    mc = profile.section(CONFIG)
    params = parameter_count(mc.model(mc.search_layers))
    out = [
        Expectation(
            stage=NAME,
            case="state",
            metric=part,
            value=value,
            unit="bytes",
            count=params,
            basis=STATE_FORMULA,
        )
        for part, value in state_bytes(params).items()
    ]
    s, b, h, a = mc.seq_len, mc.batch, mc.hidden, mc.heads
    out.append(
        Expectation(
            stage=NAME,
            case="activations",
            metric="bytes_per_layer",
            unit="bytes",
            count=s * b,
            value=activation_bytes_per_layer(s, b, h, a),
            basis=ACTIVATION_FORMULA,
        )
    )
    out.append(
        Expectation(
            stage=NAME,
            case="activations.checkpoint",
            metric="bytes_per_layer",
            unit="bytes",
            count=s * b,
            value=activation_bytes_per_layer(s, b, h, a, True),
            basis=CHECKPOINT_FORMULA,
        )
    )
    out.append(
        Expectation(
            stage=NAME,
            case="activations",
            metric="korthikanti_bytes_per_layer",
            unit="bytes",
            count=s * b,
            value=korthikanti_bytes_per_layer(s, b, h, a),
            basis="s·b·h·(34 + 5·a·s/h), Korthikanti et al. 2022: another block, shown not checked",
        )
    )
    return out


def run(profile: Profile, ctx: StageContext) -> list[Row]:
    import torch

    from suite.stages.memory.worker import memory_rows

    device = torch.device("cuda", 0) if profile.device == "cuda" else torch.device("cpu")
    mc, card = profile.section(CONFIG), card_bytes(ctx.facts)
    if card is not None and mc.budget_gib * 2**30 > usable_bytes(card):  # a card smaller than the budget
        mc = replace(mc, budget_gib=usable_bytes(card) / 2**30)
        ctx.say(
            f"memory budget sized to the card: {headroom_text(card)} (the profile's "
            f"{profile.section(CONFIG).budget_gib:g} GiB "
            f"would pass it)"
        )
    return memory_rows(mc, device, say=ctx.say)


def _one(items, case, metric):
    found = [x for x in items if x.case == case and x.metric == metric]
    return found[0] if found else None


def _against(check, rows, expectations, case, metric, tolerance) -> Verdict:
    row, exp = _one(rows, case, metric), _one(expectations, case, metric)
    if row is None or exp is None:
        return V.fail(
            check,
            expected=f"{case} {metric} measured and predicted",
            observed="missing",
            reason="no measurement or no formula: see raw/memory/stage.log",
        )
    off = row.value / exp.value - 1 if exp.value else math.inf
    return V.check(
        check,
        abs(off) <= tolerance,
        expected=f"{exp.value:,.0f} B ± {tolerance:.0%} ({exp.basis})",
        observed=f"{row.value:,.0f} B ({off:+.2%})",
        reason_ok="measured as the formula says",
        reason_bad="the measurement leaves the formula: either the formula misses a term or the run keeps "
        "something it should not (see the rows of raw/memory)",
    )


def judge(rows: list[Row], expectations: list[Expectation], facts: Facts) -> list[Verdict]:
    prof = profile_or_none(facts)
    mc: MemoryConfig = prof.section(CONFIG) if prof else MemoryConfig()
    out = [
        _against(f"state.{part}", rows, expectations, "state", part, mc.state_tolerance)
        for part in ("parameters", "gradients", "optimizer")
    ]
    out.append(
        _against(
            "activations.per_layer",
            rows,
            expectations,
            "activations",
            "bytes_per_layer",
            mc.activation_tolerance,
        )
    )
    out.append(
        _against(
            "activations.checkpointed",
            rows,
            expectations,
            "activations.checkpoint",
            "bytes_per_layer",
            mc.activation_tolerance,
        )
    )
    plain, ckpt = (
        _one(rows, "activations", "bytes_per_layer"),
        _one(rows, "activations.checkpoint", "bytes_per_layer"),
    )
    if plain and ckpt:
        out.append(
            V.check(
                "activations.checkpoint_saving",
                ckpt.value < plain.value,
                expected="checkpointing keeps less per block",
                observed=f"saves "
                f"{plain.value - ckpt.value:,.0f} B per block ({1 - ckpt.value / plain.value:.0%})",
                reason_ok="recomputation trades the saved activations for a second forward",
                reason_bad="checkpointing saved nothing: the blocks are not wrapped",
            )
        )
    return out + search_verdicts(rows, mc, facts)


def search_verdicts(rows: list[Row], mc: MemoryConfig, facts: dict) -> list[Verdict]:
    largest, oom = _one(rows, "search", "largest_batch"), _one(rows, "search", "smallest_oom")
    predicted = _one(rows, "search", "predicted_batch")
    leaks = [r for r in rows if r.case == "search" and r.metric == "try_leaked_bytes"]
    if largest is None or not leaks:
        return [
            V.fail(
                "search",
                expected="a batch search",
                observed="no search rows",
                reason="the search did not run: see raw/memory/stage.log",
            )
        ]
    leaked = [r for r in leaks if r.value != 0]
    out = [
        V.check(
            "search.no_leak",
            not leaked,
            expected="live memory back at its baseline after every try, to the byte",
            observed=f"{len(leaks)} tries, "
            + (
                ", ".join(f"batch {r.count}: {r.value:,.0f} B kept" for r in leaked)
                if leaked
                else "nothing kept"
            ),
            reason_ok="OutOfMemoryError recovered cleanly (exception dropped, gc, empty_cache)",
            reason_bad="a failed step kept tensors alive (a saved exception or traceback, a list it filled): "
            "every later try has less memory than it thinks",
        )
    ]
    converged = oom is not None and math.isfinite(oom.value) and oom.value == largest.value + 1
    out.append(
        V.check(
            "search.threshold",
            largest.value >= 1 and converged,
            expected="a batch b that fits and b+1 that raises OutOfMemoryError",
            observed=f"largest {largest.value:.0f}, first OOM {oom.value if oom else math.nan:.0f}",
            reason_ok="the threshold is found, every OutOfMemoryError recovered from",
            reason_bad="the search did not converge: every batch up to search_max_batch fit (raise it, "
            "or lower budget_gib), or batch 1 did not fit",
        )
    )
    p = predicted.value if predicted else math.nan
    near = (
        math.isfinite(p)
        and p > 0
        and (abs(largest.value - p) <= 1 or abs(largest.value / p - 1) <= mc.search_tolerance)
    )
    out.append(
        V.check(
            "search.linear",
            near,
            bad="warn",
            expected=f"the threshold within {mc.search_tolerance:.0%} (or 1) of the linear extrapolation "
            "of the first two tries' peaks to the cap",
            observed=f"largest {largest.value:.0f}, predicted {p:.0f}",
            reason_ok="memory grows linearly with the batch up to the cap",
            reason_bad="the threshold is far from linear growth: fragmentation (see the fragmentation "
            "verdict) or something allocated once per size (see try_peak_bytes)",
        )
    )
    reserved, allocated = (
        _one(rows, "fragmentation", "reserved_bytes_peak"),
        _one(rows, "fragmentation", "allocated_bytes_peak"),
    )
    if reserved is None or allocated is None:
        out.append(
            V.skip(
                "fragmentation",
                expected=f"1 − allocated/reserved ≤ {mc.fragmentation_warn:.0%} at the peak",
                observed=f"profile {facts.get('profile', {}).get('name', '?')}",
                reason="CPU memory has no caching allocator: reserved vs allocated exists on CUDA only",
            )
        )
    else:
        frag = 1 - allocated.value / reserved.value if reserved.value else 0.0
        out.append(
            V.check(
                "fragmentation",
                frag <= mc.fragmentation_warn,
                bad="warn",
                expected=f"1 − allocated/reserved ≤ {mc.fragmentation_warn:.0%} at the peak",
                observed=f"{allocated.value / 2**30:.2f} of {reserved.value / 2**30:.2f} GiB reserved "
                f"({frag:.0%} unused)",
                reason_ok="the caching allocator holds little it cannot use",
                reason_bad="the allocator holds much it cannot hand out: try "
                "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
            )
        )
    return out


def headline(rows: list[Row], verdicts: list[Verdict], expectations: list[Expectation]) -> str | None:
    """Model state (16Ψ) and activations per block, measured against the formula; the largest batch found
    against the one the first tries predicted."""
    from suite import headlines as hl

    parts = []
    for cases, name in ((("parameters", "gradients", "optimizer"), "state"), ((None,), "activations/block")):
        if name == "state":
            got = [hl.matching(rows, "state", m) for m in cases]
            want = [hl.matching(expectations, "state", m) for m in cases]
        else:
            got = [hl.matching(rows, "activations", "bytes_per_layer")]
            want = [hl.matching(expectations, "activations", "bytes_per_layer")]
        if all(got) and all(want):
            measured, formula = sum(g[0].value for g in got), sum(w[0].value for w in want)
            parts.append(
                f"{name} {hl.size(measured)} vs formula {hl.size(formula)} ({measured / formula - 1:+.1%})"
            )
    largest = hl.matching(rows, "search", "largest_batch")
    if largest:
        predicted = hl.matching(rows, "search", "predicted_batch")
        parts.append(
            f"largest batch {largest[0].value:.0f}"
            + (f", predicted {predicted[0].value:.0f}" if predicted else "")
        )
    return " · ".join(parts) or None


STAGE = Stage(
    row=31,
    after=("baseline",),
    profiles=("gloo-cpu", "nccl-gpu", "nccl-1gpu"),
    title="memory budget: 16Ψ state, activations per block, checkpointing, largest batch, fragmentation",
    measures="parameters, gradients, AdamW state and activations per block against the formula; the largest "
    "batch",
    wrong="a term off its formula; a batch search that leaks memory after an OutOfMemoryError; a fragmented "
    "allocator",
    rehearsal="MemTracker's categories on CPU against the formula; the OOM search under an imposed memory "
    "cap",
    config=CONFIG,
    estimate=estimate,
    expect=expect,
    run=run,
    judge=judge,
    headline=headline,
)
