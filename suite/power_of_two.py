"""How many ranks a stage that splits its work in halves runs on: the one rule the run and `make plan` share.

    parallel_ranks(6) == 4          # one node of 6 GPUs: ZeRO, PP, CP, EP, overlap and profile on ranks 0–3
    parallel_ranks(6, nodes=2) == 6 # across nodes every rank of each node (their degrees are whole nodes)

Pure arithmetic, no imports: suite/config.py (Profile.parallel_ranks) and suite/plan/hours.py both read it.
"""


def parallel_ranks(nproc: int, nodes: int = 1) -> int:
    """Per node, the ranks of a parallel stage's world (ZeRO, PP, CP, EP, DDP's overlap and profile): on one
    node the largest power of two ≤ nproc, as TP/DP take their degrees — their batches, heads, experts and
    layers split in halves, so 6 GPUs run them on 4 and the other 2 wait (3 → 2, 5/6/7 → 4). Across nodes
    every rank: those degrees are whole nodes (suite/config.py scaling_degrees) and the batch is raised to fit
    them (Profile.dp_model)."""
    return nproc if nodes > 1 else 1 << (max(nproc, 1).bit_length() - 1)
