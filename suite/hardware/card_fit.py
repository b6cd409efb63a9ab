"""What a stage may hold on the card it finds: the card's memory (facts), a stated headroom, each tool's
footprint.

    card = card_bytes(facts)                    # the smallest GPU's total memory, from topology's nvidia-smi
                                                # -q
    max_bytes, basis = nccl_tests_max_bytes(profile.sweep, card)

Headroom: a stage plans for HEADROOM of the card's total memory less RESERVE_BYTES: the CUDA context (≈0.5
GiB), NCCL's own buffers (channels × buffer size, a few hundred MiB at most on 8 GPUs) and the allocator's
slack live in the rest. Where the card is unknown (a CPU profile; an `nvidia-smi -q` that did not parse)
nothing is capped and the stage says so.

nccl-tests' footprint: each `*_perf` allocates, for its largest size S (-e), a send buffer, a receive buffer
and, with -c 1 (the check), an expected-result buffer, each at most S bytes (nccl-tests' AllocateBuffs:
sendBytes, recvBytes, and recvBytes again for the expected values): 3·S per GPU. -e 8G is 24 GiB a GPU: more
than a 24 GB card holds. The largest size is therefore capped at the largest step of the sweep (-b · -f^k)
within usable / 3.

Model state of a training stage: suite/costmodel/memory_formula.py's 16Ψ and its activation formula (the
memory stage's), never a second formula; `training_bytes` adds them up for a stage's model.
"""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Any, Mapping

from suite.costmodel.memory_formula import activation_bytes_per_layer, state_bytes
from suite.parsers.smi_query import parse_blocks

HEADROOM = 0.85
"""Share of (the card's total memory − RESERVE_BYTES) a stage plans to hold."""
RESERVE_BYTES = 1 << 30
"""Kept back before the share: the CUDA context, NCCL's buffers, the allocator's slack."""
NCCL_TESTS_BUFFERS = 3
"""Buffers of S bytes each nccl-tests allocates per GPU with -c 1: send, receive, expected."""

_MIB = re.compile(r"^\s*(\d+)\s*MiB\s*$")


def memory_from_query(text: str) -> int | None:
    """The smallest GPU's `FB Memory Usage/Total` in an `nvidia-smi -q` capture, bytes; None when none is
    given."""
    _, gpus, _ = parse_blocks(text)
    totals = []
    for g in gpus:
        m = _MIB.match(g.get("FB Memory Usage/Total") or "")
        if m:
            totals.append(int(m.group(1)) << 20)
    return min(totals) if totals else None


def card_bytes(facts: Mapping[str, Any]) -> int | None:
    """The total memory of the smallest GPU topology found, bytes (None: not known)."""
    value = (facts.get("topology") or {}).get("gpu_memory_bytes")
    return int(value) if value else None


def usable_bytes(card: int) -> int:
    """What a stage may plan to hold on a card of `card` bytes (see the module's headroom)."""
    return int(max(0, card - RESERVE_BYTES) * HEADROOM)


def headroom_text(card: int) -> str:
    return (
        f"{HEADROOM:.0%} of the card's {card / 2**30:.1f} GiB less {RESERVE_BYTES >> 30} GiB kept back: "
        f"{usable_bytes(card) / 2**30:.1f} GiB"
    )


def nccl_tests_footprint(max_bytes: int) -> int:
    """Bytes per GPU an nccl-tests *_perf binary allocates for -e max_bytes with the check on."""
    return NCCL_TESTS_BUFFERS * max_bytes


def nccl_tests_max_bytes(sweep, card: int | None) -> tuple[int, str]:
    """(the -e the card can hold: the sweep's largest size, or the largest step under the cap; what it was
    sized to)."""
    if card is None:
        return sweep.max_bytes, "the card's memory is not known: the profile's -e unchanged"
    cap = usable_bytes(card) // NCCL_TESTS_BUFFERS
    sizes = [s for s in sweep.sizes() if s <= cap] or [sweep.min_bytes]
    top = sizes[-1]
    basis = (
        f"-e {top} B: send + receive + expected buffers ({NCCL_TESTS_BUFFERS} × S = "
        f"{nccl_tests_footprint(top) / 2**30:.2f} GiB) within {headroom_text(card)}"
    )
    if top < sweep.max_bytes:
        basis += (
            f" (the profile's -e {sweep.max_bytes} B would need "
            f"{nccl_tests_footprint(sweep.max_bytes) / 2**30:.0f} GiB)"
        )
    return top, basis


def fitted_sweep(sweep, card: int | None):
    """The sweep with its largest size capped for nccl-tests on this card (the same sizes below it)."""
    top, _ = nccl_tests_max_bytes(sweep, card)
    return sweep if top == sweep.max_bytes else dataclasses.replace(sweep, max_bytes=top)


def training_bytes(
    params: int, *, seq: int, batch: int, hidden: int, heads: int, layers: int, copies: float = 1.0
) -> int:
    """Model state (memory_formula.state_bytes: 16Ψ) × `copies` (a stage holding a reference model too) plus
    every block's activations (memory_formula.activation_bytes_per_layer), bytes on one GPU."""
    state = sum(state_bytes(params).values())
    return int(math.ceil(state * copies)) + layers * activation_bytes_per_layer(seq, batch, hidden, heads)
