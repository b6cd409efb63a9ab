"""The pipeline bubble: the share of a step a stage waits, for P stages and M micro-batches (no torch).

With P ranks of equal stages (forward f, backward b per micro-batch), GPipe and 1F1B keep every
rank busy M·(f + b) out of a step of (M + P − 1)·(f + b): the ramp-up and the ramp-down cost P − 1
slots of f + b each, whatever the order inside. So

    idle / total = (P − 1) / (M + P − 1)                        GPipe, 1F1B (torch's 1F1B needs M ≥ P)
    idle / total = (P − 1) / (v·M + P − 1)                      interleaved, v chunks per rank of f/v, b/v

(Narayanan et al., "Efficient Large-Scale Language Model Training on GPU Clusters Using Megatron-LM",
2021, §2.2). The interleaved ramp is P − 1 slots of a chunk, (f + b)/v each, against v·M chunks of work.
"""

from __future__ import annotations

SINGLE = ("gpipe", "1f1b")
LOOPED = ("interleaved_1f1b", "looped_bfs", "interleaved_zb")
V_SHAPED = ("zbv", "dualpipev")
TORCH_SCHEDULES = SINGLE + LOOPED + V_SHAPED
"""torch.distributed.pipelining's schedules by the suite's names (suite/stages/pp/split.py builds them)."""
HAND_SCHEDULES = ("hand_1f1b",)
"""Written out over isend/irecv (suite/stages/pp/bubble.py): the sleep-stage drill only."""

INTERLEAVED = frozenset({"interleaved_1f1b"})
"""Schedules whose ranks hold v > 1 chunks (the formula with v·M)."""
NEEDS_M_AT_LEAST_P = frozenset({"1f1b", "hand_1f1b", "interleaved_1f1b"})
"""Schedules run only at M ≥ P (torch refuses Schedule1F1B below it; the hand-written one follows it)."""
IN_ROUNDS = frozenset({"interleaved_1f1b", "interleaved_zb"})
"""torch runs these in max(1, M // P) rounds and refuses an M that is not a multiple of the rounds."""
NEEDS_M_AT_LEAST_2P = frozenset({"dualpipev"})
"""torch's DualPipeV needs as many micro-batches as stages (2 per rank)."""


def bubble_fraction(stages: int, microbatches: int, chunks: int = 1) -> float:
    """(P − 1) / (v·M + P − 1): the idle share of a step of each rank."""
    if stages < 1 or microbatches < 1 or chunks < 1:
        raise ValueError(f"P = {stages}, M = {microbatches}, v = {chunks}: each must be at least 1")
    return (stages - 1) / (chunks * microbatches + stages - 1)


def schedule_chunks(schedule: str, chunks: int) -> int:
    """v for the formula: the configured chunks for an interleaved schedule, 1 for the others."""
    return chunks if schedule in INTERLEAVED else 1


def runs_at(schedule: str, stages: int, microbatches: int) -> bool:
    """Whether `schedule` runs at P = stages, M = microbatches (torch's own refusals, said before the run)."""
    if schedule in NEEDS_M_AT_LEAST_P and microbatches < stages:
        return False
    if schedule in NEEDS_M_AT_LEAST_2P and microbatches < 2 * stages:
        return False
    return schedule not in IN_ROUNDS or microbatches % max(1, microbatches // stages) == 0


def ideal_step_s(
    stages: int, microbatches: int, forward_s: float, backward_s: float, chunks: int = 1
) -> float:
    """The step time of equal stages: (v·M + P − 1) slots of (f + b)/v."""
    return (chunks * microbatches + stages - 1) * (forward_s + backward_s) / chunks
