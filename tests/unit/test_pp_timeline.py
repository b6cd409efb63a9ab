"""The bubble replayed from the schedule's slots (suite/stages/pp/timeline.py): a correct 1F1B or GPipe
replays to exactly (P−1)/(M+P−1) however its slots are stretched and its hand-offs delayed (what a loaded
machine does); an extra barrier, or a stage held until its neighbour's slot ends, replays to more.

The timelines are made by a small event simulation of the schedule on P ranks: each slot starts when its
rank's previous slot and its data dependency (and, for the mistakes, what the mistake makes it wait for) have
ended, plus a random hand-off delay; it lasts its nominal length times a random stretch."""

from __future__ import annotations

import random

import pytest

from suite.costmodel.bubble import bubble_fraction
from suite.stages.pp.bubble import BusyClock
from suite.stages.pp.timeline import Slot, replay, slot_kind

F, B = 0.040, 0.080
UNITS = {"F": 1.0, "B": B / F, "W": 0.0}


def order(schedule: str, stage: int, ranks: int, microbatches: int) -> list[tuple[str, int]]:
    """(kind, micro-batch) of one stage's slots in the order the schedule runs them."""
    if schedule == "gpipe":
        return [("F", m) for m in range(microbatches)] + [("B", m) for m in range(microbatches)]
    warmup = min(ranks - stage - 1, microbatches)
    out = [("F", m) for m in range(warmup)]
    for i in range(microbatches - warmup):
        out += [("F", warmup + i), ("B", i)]
    return out + [("B", m) for m in range(microbatches - warmup, microbatches)]


def simulate(
    schedule: str,
    ranks: int,
    microbatches: int,
    rng: random.Random,
    stretch: float = 0.0,
    delay_s: float = 0.0,
    mistake: str | None = None,
) -> tuple[list[list[Slot]], list[float]]:
    """Every rank's slots on one clock (start 100 s, as time.monotonic() is never 0)."""
    plans = [order(schedule, s, ranks, microbatches) for s in range(ranks)]
    done: dict[tuple[int, str, int], Slot] = {}
    timelines: list[list[Slot]] = [[] for _ in range(ranks)]
    starts = [100.0 + rng.uniform(0, delay_s) for _ in range(ranks)]
    backwards_done = [[] for _ in range(ranks)]  # per rank: end of its k-th backward
    while any(len(t) < len(p) for t, p in zip(timelines, plans)):
        progressed = False
        for r in range(ranks):
            if len(timelines[r]) == len(plans[r]):
                continue
            kind, m = plans[r][len(timelines[r])]
            dep = (
                (r - 1, "F", m)
                if kind == "F" and r > 0
                else (r + 1, "B", m)
                if kind == "B" and r < ranks - 1
                else None
            )
            if dep and dep not in done:
                continue
            waits = [done[dep].end] if dep else []
            if mistake == "extra_barrier" and backwards_done[r] and timelines[r][-1].kind == "B":
                k = len(backwards_done[r]) - 1  # all ranks past their k-th backward before anyone goes on
                if any(len(b) <= k for b in backwards_done):
                    continue
                waits += [b[k] for b in backwards_done]
            own = timelines[r][-1].end if timelines[r] else starts[r]
            start = max([own, *[t + rng.uniform(0, delay_s) for t in waits]])
            length = (F if kind == "F" else B) * (1 + rng.uniform(0, stretch))
            slot = Slot(kind, start, start + length, r, m)
            timelines[r].append(slot)
            done[(r, kind, m)] = slot
            if kind == "B":
                backwards_done[r].append(slot.end)
            progressed = True
        assert progressed, "the simulated schedule deadlocked"
    return timelines, starts


def mean_idle(timelines, starts) -> float:
    idle, _ = replay(timelines, starts, UNITS)
    return sum(idle) / len(idle)


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
@pytest.mark.parametrize("ranks,microbatches", [(2, 1), (2, 2), (2, 3), (4, 4), (4, 8), (8, 16)])
def test_a_correct_schedule_replays_to_the_formula_exactly_however_loaded(schedule, ranks, microbatches):
    rng = random.Random(ranks * 100 + microbatches)
    quiet = simulate(schedule, ranks, microbatches, rng)
    assert mean_idle(*quiet) == pytest.approx(bubble_fraction(ranks, microbatches), abs=1e-9)
    for _ in range(20):  # slots 0–40 % long, hand-offs 0–15 ms late (a sleep waking late, a rank descheduled)
        loaded = simulate(schedule, ranks, microbatches, rng, stretch=0.4, delay_s=0.015)
        assert mean_idle(*loaded) == pytest.approx(bubble_fraction(ranks, microbatches), abs=1e-9)


def test_the_wall_clock_idle_of_the_same_loaded_timelines_moves():
    """What the replay replaces: the wall-clock idle of those timelines is off the formula."""
    rng = random.Random(7)
    offs = []
    for _ in range(20):
        timelines, starts = simulate("1f1b", 2, 3, rng, stretch=0.4, delay_s=0.015)
        end = max(s.end for t in timelines for s in t)
        wall = [1 - sum(s.end - s.start for s in t) / (end - min(starts)) for t in timelines]
        offs.append(abs(sum(wall) / 2 - bubble_fraction(2, 3)))
    assert max(offs) > 0.02


@pytest.mark.parametrize("ranks,microbatches", [(2, 2), (2, 3), (4, 8)])
def test_an_extra_barrier_replays_to_more_than_the_formula(ranks, microbatches):
    rng = random.Random(microbatches)
    for stretch, delay in ((0.0, 0.0), (0.4, 0.015)):
        got = mean_idle(*simulate("1f1b", ranks, microbatches, rng, stretch, delay, mistake="extra_barrier"))
        assert got > bubble_fraction(ranks, microbatches) + 0.03, got


def test_a_slot_held_past_its_neighbours_next_slot_counts_one_wait_more():
    """The one thing load can do to the replay: a hand-off late by more than the sender's next slot."""
    timelines, starts = simulate("1f1b", 2, 3, random.Random(1))
    exact = mean_idle(timelines, starts)
    late = [list(t) for t in timelines]
    first = late[1][0]  # rank 1's first forward, started after rank 0's second forward ended
    shift = late[0][1].end - first.start + 0.001
    late[1] = [Slot(s.kind, s.start + shift, s.end + shift, s.stage, s.microbatch) for s in late[1]]
    assert mean_idle(late, starts) > exact


def test_slot_kinds_and_refusals():
    assert [
        slot_kind(n)
        for n in (
            "forward",
            "forward_one_chunk",
            "backward",
            "backward_one_chunk",
            "backward_weight_one_chunk",
            "step",
            "<lambda>",
        )
    ] == ["F", "F", "B", "B", "W", None, None]
    with pytest.raises(ValueError, match="timelines"):
        replay([[Slot("F", 0, 1)]], [], UNITS)


def test_the_wall_clock_records_slots_with_their_stage_and_micro_batch():
    """BusyClock's slots: a forward/backward call is a slot (torch's chunk id as its micro-batch, else the
    count of its kind), any other call is timed for its busy time only."""
    import torch

    clock = BusyClock("wall", torch.device("cpu"))

    def forward(x):
        return x

    def backward_one_chunk(chunk_id):
        return chunk_id

    f, b, other = (
        clock.timed(forward, stage=1),
        clock.timed(backward_one_chunk, stage=1),
        clock.timed(lambda: None),
    )
    f(torch.ones(1)), f(torch.ones(1)), b(5), other()
    assert [(s.kind, s.stage, s.microbatch) for s in clock.slots] == [("F", 1, 0), ("F", 1, 1), ("B", 1, 5)]
    assert all(s.start <= s.end for s in clock.slots) and clock.busy_s() >= sum(
        s.end - s.start for s in clock.slots
    )
