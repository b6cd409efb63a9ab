"""What pp's pipelined GPT and cp's attention sweep hold on one GPU, and the sizes each stage picks to fit the
card.

Pure arithmetic (expect() runs in the runner's process, free of torch), on suite/hardware/card_fit.py's
headroom (usable_bytes) and suite/costmodel/memory_formula.py's terms (state 16Ψ, activations per block): no
second formula.

pp (suite/stages/pp/worker.py), the heaviest rank through its three phases:
  reference  every rank trains the float32 model whole first: reference()'s model, its gradients and their
             clone
             (12Ψ) stay alive while train_single_process holds a second model with AdamW (16Ψ) and returns a
             clone (4Ψ): 32Ψ = 2 × the formula's 16Ψ, plus one model's activations and the logits.
  golden     the reference's gradients and parameters (8Ψ) kept, plus this rank's pipeline stages trained with
             AdamW (16Ψ of its share) and their activations for the whole batch (GPipe keeps every
             micro-batch).
  timed      the same 8Ψ kept, plus the profile-dtype stages with M × micro_batch sequences in flight.
  float32 activations are taken at twice the formula's (its bf16 terms at 4 bytes: an upper bound); the logits
  at LOGIT_COPIES × 4 bytes per token and vocabulary entry (the logits, log-softmax's output, their gradient).
  Sizing: the profile's layers are kept (PP = 8 with v = 2 needs a unit per stage); the hidden size is halved
  down to PP_MIN_HIDDEN, then the sequence down to PP_MIN_SEQ, until the heaviest phase fits.

cp (suite/stages/cp/worker.py): the hand-written attention blocks (attention_blocks.block_attention) build
explicit
  float32 scores. Ulysses holds B·(H/P)·S·S of them per rank (the whole sequence, H/P heads); the ring keeps
  each of its P blocks of B·H·(S/P)·(S/P) for backward, B·H·S·S/P in all. Per score element: saved for
  backward the masked scores (4 B), exp's output (4 B) and the bf16 probabilities (2 B); backward's gradients
  through them and the forward's transients bring the live bytes to at most SCORE_BYTES_PER_ELEMENT. A length
  whose footprint at the smallest CP degree that runs passes the card is dropped from the sweep (every degree
  times the same lengths).
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

from suite.config import GptConfig
from suite.costmodel.memory_formula import activation_bytes_per_layer, state_bytes
from suite.costmodel.sizing import parameter_count
from suite.hardware.card_fit import card_bytes, headroom_text, usable_bytes

FP32_ACTIVATION_FACTOR = 2
"""float32 activations against the formula's bf16-autocast ones (every 2-byte term at 4): an upper bound."""
LOGIT_COPIES = 3
"""Vocabulary-wide float32 tensors per token: the logits, log-softmax's output, their gradient."""
PP_MIN_HIDDEN = 256
PP_MIN_SEQ = 128
SCORE_BYTES_PER_ELEMENT = 24
"""Live bytes per attention-score element at the peak of forward + backward (see the module's cp note)."""


def _state(params: int) -> int:
    return sum(state_bytes(params).values())


def _activations(cfg: GptConfig, layers: int, batch: int, float32: bool) -> int:
    per = activation_bytes_per_layer(cfg.seq_len, batch, cfg.hidden, cfg.heads)
    logits = LOGIT_COPIES * 4 * batch * cfg.seq_len * cfg.vocab
    return layers * per * (FP32_ACTIVATION_FACTOR if float32 else 1) + logits


def halved_to_fit(cfg: GptConfig, need, usable: int) -> GptConfig:
    """The model with its hidden size halved (down to PP_MIN_HIDDEN, a multiple of the heads), then its
    sequence (down to PP_MIN_SEQ), until need(model) ≤ usable; the layers and the batch kept (degrees and
    micro-batches depend on them). The smallest such model when none fits (the caller says so)."""
    while need(cfg) > usable:
        if cfg.hidden // 2 >= max(PP_MIN_HIDDEN, cfg.heads) and (cfg.hidden // 2) % cfg.heads == 0:
            cfg = dataclasses.replace(cfg, hidden=cfg.hidden // 2)
        elif cfg.seq_len // 2 >= PP_MIN_SEQ:
            cfg = dataclasses.replace(cfg, seq_len=cfg.seq_len // 2)
        else:
            break
    return cfg


def scaling_footprint(cfg: GptConfig) -> dict[str, int]:
    """Bytes on one rank of baseline, tp, dp, zero, overlap and profile at degree 1, the heaviest (a higher
    degree holds a share of the model or of the batch): dp and zero train the float32 reference whole on every
    rank first (train_single_process: 16Ψ and its returned clone 4Ψ, tp's and overlap's one step less), then
    keep its parameters (4Ψ) beside the measured model (16Ψ, the profile's dtype, the whole batch)."""
    psi = parameter_count(cfg)
    return {
        "reference": _state(psi) + 4 * psi + _activations(cfg, cfg.layers, cfg.batch, True),
        "measured": 4 * psi + _state(psi) + _activations(cfg, cfg.layers, cfg.batch, False),
    }


def scaling_sized(cfg: GptConfig, card: int | None) -> tuple[GptConfig, str]:
    """(the model baseline, tp, dp, zero, overlap, profile and fault train on this card — one model, so that
    tp's and dp's speedups divide the baseline's step time of the same model —, what it was sized to)."""
    if card is None:
        return cfg, "the card's memory is not known: the profile's model unchanged"
    need = lambda c: max(scaling_footprint(c).values())  # noqa: E731
    sized = halved_to_fit(cfg, need, usable_bytes(card))
    text = (
        f"{sized.layers} layers × d={sized.hidden}, seq {sized.seq_len}, batch {sized.batch}: "
        + ", ".join(f"{k} {v / 2**30:.1f} GiB" for k, v in scaling_footprint(sized).items())
        + f" at degree 1 within {headroom_text(card)}"
    )
    if sized != cfg:
        text += f"; the profile's d={cfg.hidden}, seq {cfg.seq_len} would need {need(cfg) / 2**30:.1f} GiB"
    return sized, text


def pp_footprint(
    cfg: GptConfig, degree: int, microbatches: Sequence[int], micro_batch: int
) -> dict[str, int]:
    """Bytes on pp's heaviest rank in each phase (see the module), for PP degree `degree` (the smallest that
    runs: its stages are the largest share)."""
    psi = parameter_count(cfg)
    stage_layers = -(-cfg.layers // degree)
    # with both ends: zbv's rank 0 holds them
    stage = parameter_count(dataclasses.replace(cfg, layers=stage_layers))
    kept = state_bytes(psi)["parameters"] + state_bytes(psi)["gradients"]  # the reference's params and grads
    in_flight = max(microbatches, default=1) * micro_batch
    return {
        "reference": 2 * _state(psi) + _activations(cfg, cfg.layers, cfg.batch, True),
        "golden": kept + _state(stage) + _activations(cfg, stage_layers, cfg.batch, True),
        "timed": kept + _state(stage) + _activations(cfg, stage_layers, in_flight, False),
    }


def pp_sized(
    cfg: GptConfig, card: int | None, degree: int, microbatches: Sequence[int], micro_batch: int
) -> tuple[GptConfig, str]:
    """(the pipelined GPT that fits the card, what it was sized to); the model unchanged where the card is
    unknown."""
    if card is None:
        return cfg, "the card's memory is not known: the profile's model unchanged"
    usable, start = usable_bytes(card), cfg
    need = lambda c: max(pp_footprint(c, degree, microbatches, micro_batch).values())  # noqa: E731
    cfg = halved_to_fit(cfg, need, usable)
    phases = pp_footprint(cfg, degree, microbatches, micro_batch)
    text = (
        f"{cfg.layers} layers × d={cfg.hidden}, seq {cfg.seq_len}, batch {cfg.batch}: heaviest rank at "
        f"PP={degree} "
        + ", ".join(f"{k} {v / 2**30:.1f} GiB" for k, v in phases.items())
        + f" (16Ψ state, the memory formula's activations) within {headroom_text(card)}"
    )
    if cfg != start:
        text += (
            f"; the profile's d={start.hidden}, seq {start.seq_len} would need {need(start) / 2**30:.1f} GiB"
        )
    if need(cfg) > usable:
        text += "; even the smallest model passes the card"
    return cfg, text


def cp_footprint(batch: int, heads: int, head_dim: int, seq: int, degree: int) -> int:
    """Bytes one CP rank holds at sequence `seq`: the larger of Ulysses' and the ring's scores (see the
    module), plus q, k, v, the output and their gradients (bf16 at most 4 B) for the whole sequence."""
    ulysses = batch * (heads // degree) * seq * seq
    ring = batch * heads * seq * seq // degree
    tensors = 8 * batch * heads * seq * head_dim * 4
    return max(ulysses, ring) * SCORE_BYTES_PER_ELEMENT + tensors


def cp_sized(
    seq_lens: Sequence[int], card: int | None, batch: int, heads: int, head_dim: int, degrees: Sequence[int]
) -> tuple[tuple[int, ...], str]:
    """(the timed lengths that fit the card at the smallest degree, what was dropped and why)."""
    if card is None or not degrees:
        return tuple(seq_lens), "the card's memory is not known: every length kept"
    usable, d = usable_bytes(card), min(degrees)
    kept = tuple(s for s in seq_lens if cp_footprint(batch, heads, head_dim, s, d) <= usable)
    dropped = [s for s in seq_lens if s not in kept]
    text = (
        f"S = {'/'.join(map(str, kept)) or 'none'}: explicit float32 scores (B·H/P·S² for Ulysses, B·H·S²/P "
        f"for the ring's blocks, {SCORE_BYTES_PER_ELEMENT} B per element live) at CP={d} within "
        f"{headroom_text(card)}"
    )
    if dropped:
        text += "; dropped " + ", ".join(
            f"S={s} ({cp_footprint(batch, heads, head_dim, s, d) / 2**30:.1f} GiB)" for s in dropped
        )
    return kept, text


EP_ACTIVATION_COPIES = 3
"""Per routed row of the timings: its forward tensors, those autograd saves, and their gradients."""
EP_MIN_TOKENS = 256


def ep_footprint(
    experts: int, top_k: int, tokens: int, hidden: int, ffn: int, ranks: int, dtype_bytes: int
) -> int:
    """Bytes one EP rank holds in the timings (suite/stages/ep/timing.py): every expert's weights as built (E
    · 2·h·f), this rank's E/P experts cloned with their gradients, and, at the worst skew with no capacity
    limit, every rank's T·k assignments landing here, each row h wide in, f wide through the MLP (twice:
    before and after the activation) and h wide out, EP_ACTIVATION_COPIES times."""
    weights = experts * 2 * hidden * ffn * dtype_bytes
    local = 2 * (experts // ranks) * 2 * hidden * ffn * dtype_bytes
    rows = ranks * tokens * top_k
    return (
        weights
        + local
        + rows * (2 * hidden + 2 * ffn) * dtype_bytes * EP_ACTIVATION_COPIES
        + tokens * hidden * 4
    )


def ep_sized(
    tokens: int,
    card: int | None,
    *,
    experts: int,
    top_k: int,
    hidden: int,
    ffn: int,
    ranks: int,
    dtype_bytes: int,
) -> tuple[int, str]:
    """(tokens per rank of the timings that fit the card: halved from the profile's, what it was sized to)."""
    if card is None:
        return tokens, "the card's memory is not known: the profile's tokens unchanged"
    usable, start = usable_bytes(card), tokens
    need = lambda t: ep_footprint(experts, top_k, t, hidden, ffn, ranks, dtype_bytes)  # noqa: E731
    while need(tokens) > usable and tokens // 2 >= EP_MIN_TOKENS:
        tokens //= 2
    text = (
        f"{tokens} tokens per rank: {need(tokens) / 2**30:.1f} GiB at EP={ranks} (all {experts} experts' "
        f"weights, "
        f"this rank's with their gradients, every rank's assignments landing here) within "
        f"{headroom_text(card)}"
    )
    if tokens != start:
        text += f"; the profile's {start} would need {need(start) / 2**30:.1f} GiB"
    return tokens, text


def scaling_model(profile, facts: dict | None) -> GptConfig:
    """The profile's model as baseline, tp, overlap and profile train it on the card topology found."""
    return scaling_sized(profile.model, card_bytes(facts or {}))[0]


def scaling_dp_model(profile, facts: dict | None) -> GptConfig:
    """dp's and zero's: the profile's dp_model (its batch raised for every DP degree) at the card's width and
    length."""
    m = scaling_model(profile, facts)
    return dataclasses.replace(profile.dp_model, hidden=m.hidden, seq_len=m.seq_len)
