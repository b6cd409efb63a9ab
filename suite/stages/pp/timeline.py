"""The pipeline bubble read from the schedule itself: every rank's compute slots on one clock, replayed in
slot units.

    slots = clock.slots                     # [(kind, start, end), ...] of this rank, kind F or B,
                                            # time.monotonic()
    timelines = gather(slots)               # every rank's, on one host's monotonic clock
    idle = replay(timelines, starts, units={"F": 1.0, "B": 2.0})   # each rank's idle share in slot units

Wall-clock idle of a sleep-stage step moves with the machine's load: a 40 ms sleep that wakes 10 ms late
shifts idle time between ranks, and a loaded machine reads a bubble off the formula with a correct schedule.
What the schedule decides is the order: which slot waited for which. The replay keeps only that. A slot S
that started after a gap on its rank waited for something; every slot X of the rank that feeds S (the stage
before it for a forward, after it for a backward) that ended inside that gap (previous slot's end ≤ X.end ≤
S.start) is taken as what S waited for, whatever X was (a barrier or a blocked send makes a forward wait for
the stage before's backward). Each slot also waits, whenever it started, for the work whose output it consumes
(the stage before's forward of its micro-batch; the stage after's backward), when the slots name their stage
and micro-batch. Each slot then starts, in
slot units (a forward 1, a backward its configured ratio), when its rank's previous slot and everything it
waited for have ended; the step lasts as long as the last slot's end. A correct schedule replays to
exactly (P−1)/(M+P−1) whatever the load; an extra barrier or a stage blocked on a send makes a slot wait
for one that the schedule does not order before it, and the replay's bubble grows by whole slots.

What the load can still do: delay a slot's start past the end of the next slot of the rank it waited for
(one slot, ≥ 40 ms late) — then it counts one extra wait. A slot in whose gap its feeding rank ended nothing
waited for its own rank and its data only, however long the gap (a late wake-up is not a dependency).
"""

from __future__ import annotations

from dataclasses import dataclass

KINDS = {"forward": "F", "backward_weight": "W", "backward": "B"}
"""Slot kinds by the compute call's name (the hand-written schedule's forward/backward, torch's
*_one_chunk)."""


@dataclass(frozen=True)
class Slot:
    kind: str
    start: float
    end: float
    stage: int | None = None
    """The pipeline stage it computed (a rank holds several in interleaved schedules); None: not known."""
    microbatch: int | None = None


def slot_kind(name: str) -> str | None:
    """F, B or W from a compute call's name (backward_weight_one_chunk before backward_one_chunk); None for a
    call that is neither (timed for its busy time, not a slot of the schedule)."""
    return next((kind for prefix, kind in KINDS.items() if name.startswith(prefix)), None)


def feeder(rank: int, ranks: int, kind: str) -> int:
    """The rank a slot's input comes from: a forward's from the stage before (around the loop: an interleaved
    schedule's last rank feeds the first rank's next chunk), a backward's from the stage after. Only it can
    hold the slot back in a correct schedule; a slot of the other side ending in the gap (the stage after
    running ahead while this one waits for the stage before) ended there by chance."""
    return (rank - 1) % ranks if kind == "F" else (rank + 1) % ranks


def data_dependency(slot: Slot, last_stage: int | None) -> tuple[str, int, int] | None:
    """The work whose output the slot consumes: a forward the stage before's forward of its micro-batch, a
    backward the stage after's backward (the last stage's its own forward). Kept whatever the clock says: a
    rank running slow sees its input ready before it looks, and did not wait, but the schedule still orders
    it."""
    if slot.stage is None or slot.microbatch is None or last_stage is None:
        return None
    if slot.kind == "F":
        return ("F", slot.stage - 1, slot.microbatch) if slot.stage > 0 else None
    return (
        ("B", slot.stage + 1, slot.microbatch)
        if slot.stage < last_stage
        else ("F", slot.stage, slot.microbatch)
    )


def replay(
    timelines: list[list[Slot]], starts: list[float], units: dict[str, float]
) -> tuple[list[float], float]:
    """(each rank's idle share, the step's length) in slot units. `timelines[r]` are rank r's slots in the
    order they ran, `starts[r]` the rank's window start (right after the opening barrier), `units` the
    length of a slot of each kind (F, B, W)."""
    if len(timelines) != len(starts) or not timelines:
        raise ValueError(f"{len(timelines)} timelines for {len(starts)} window starts")
    ends: list[list[tuple[float, float]]] = [[] for _ in timelines]  # per rank: (physical end, logical end)
    by_work: dict[tuple[str, int, int], float] = {}  # (kind, stage, micro-batch) → logical end
    last_stage = max((s.stage for slots in timelines for s in slots if s.stage is not None), default=None)
    order = sorted(
        (slot.start, rank, i) for rank, slots in enumerate(timelines) for i, slot in enumerate(slots)
    )
    logical_end = [0.0] * len(timelines)
    for _, rank, i in order:
        slot = timelines[rank][i]
        # a rank's first slot: from the barrier's release (the earliest start), as a rank let out of the
        # barrier late still waited for what ended before its first slot
        gap_from = timelines[rank][i - 1].end if i else min(starts)
        begin = logical_end[rank]
        dep = data_dependency(slot, last_stage)
        if dep in by_work:
            begin = max(begin, by_work[dep])
        other = feeder(rank, len(timelines), slot.kind)
        if other != rank:
            waited = [logical for physical, logical in ends[other] if gap_from <= physical <= slot.start]
            begin = max(begin, *waited) if waited else begin
        logical_end[rank] = begin + units[slot.kind]
        ends[rank].append((slot.end, logical_end[rank]))
        if slot.stage is not None and slot.microbatch is not None:
            by_work[(slot.kind, slot.stage, slot.microbatch)] = logical_end[rank]
    length = max(logical_end)
    busy = [sum(units[s.kind] for s in slots) for slots in timelines]
    return [1.0 - b / length if length > 0 else 0.0 for b in busy], length
