"""The cp stage's timings: one attention layer (forward and backward) per sequence length, for ring
attention and Ulysses, and whether the ring's K/V rotation hides behind the block computations.

    rows = layer_times(w, group, degree, seq_len, shape, reps)      # ranks of `group` only
    rows += overlap_times(w, group, degree, seq_len, shape, reps)

Overlap: the ring's forward timed as is, with its rotation left out (every block on the rank's own
K/V: the compute alone), and with its computation left out (the rotation alone);
hidden = (compute + rotation − ring) / rotation, clipped to [0, 1] (1: the rotation costs nothing).
"""

from __future__ import annotations

import torch

from suite.results import Row
from suite.stages.cp.golden import AttentionShape, full_inputs
from suite.stages.cp.ring_attention import ring_attention
from suite.stages.cp.ulysses import ulysses_attention
from suite.workloads.golden import group_max
from suite.workloads.measure import time_steps, typical

STAGE = "cp"
ATTEND = {"ring": ring_attention, "ulysses": ulysses_attention}


def _shards(shape: AttentionShape, group, seed: int, device, dtype):
    import torch.distributed as dist

    me, n = dist.get_rank(group), dist.get_world_size(group)
    full = full_inputs(shape, seed, device, dtype)
    return {k: t.chunk(n, dim=2)[me].contiguous() for k, t in full.items()}


def layer_times(
    w, group, degree: int, shape: AttentionShape, reps: int, dtype, causal: bool = True
) -> list[Row]:
    """Seconds per forward+backward of one attention layer, ring and Ulysses, the slowest rank's median."""
    shard = _shards(shape, group, 0, w.device, dtype)
    out = []
    for algo, attend in ATTEND.items():
        q, k, v = (shard[c].detach().clone().requires_grad_(True) for c in "qkv")

        def step():
            o, _ = attend(q, k, v, group, causal=causal)
            o.backward(shard["g"])

        step()  # warm-up
        seconds = group_max(typical(time_steps(step, reps, w.device)), group)
        out.append(
            Row(
                stage=STAGE,
                case="layer",
                metric="time_s",
                value=seconds,
                unit="s",
                algo=algo,
                world=degree,
                count=shape.seq_len,
                dtype=str(dtype).removeprefix("torch."),
                source="hand",
                rank=w.rank,
            )
        )
    return out


def overlap_times(
    w, group, degree: int, shape: AttentionShape, reps: int, dtype, causal: bool = True
) -> list[Row]:
    """The ring's forward as is, compute alone and rotation alone, and the hidden fraction of the rotation."""
    shard = _shards(shape, group, 1, w.device, dtype)
    q, k, v = shard["q"], shard["k"], shard["v"]
    variants = {"ring": {}, "compute_only": {"rotate": False}, "rotation_only": {"compute": False}}
    seconds = {}
    with torch.no_grad():
        for name, kwargs in variants.items():
            step = lambda: ring_attention(q, k, v, group, causal=causal, **kwargs)  # noqa: E731
            step()
            seconds[name] = group_max(typical(time_steps(step, reps, w.device)), group)
    rotation = seconds["rotation_only"]
    hidden = (
        (seconds["compute_only"] + rotation - seconds["ring"]) / rotation if rotation > 0 else float("nan")
    )
    common = dict(
        stage=STAGE,
        case="overlap",
        world=degree,
        count=shape.seq_len,
        dtype=str(dtype).removeprefix("torch."),
        source="hand",
        rank=w.rank,
    )
    rows = [Row(metric="forward_s", value=s, unit="s", algo=name, **common) for name, s in seconds.items()]
    rows.append(
        Row(metric="rotation_hidden", value=min(1.0, max(0.0, hidden)), unit="ratio", algo="ring", **common)
    )
    return rows
