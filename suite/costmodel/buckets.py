"""DDP's gradient buckets and the α-β prediction of how much of their all-reduce a backward pass hides.

    layout = ddp_bucket_layout(sizes_in_ready_order, cap_bytes=25 * MIB, first_cap_bytes=1 * MIB)
    overlap_prediction(layout, n=8, alpha_s=5e-6, beta_Bps=200e9)

DDP groups gradients into buckets in the order they become ready in backward (roughly the
reverse of the parameters' registration order) and all-reduces a bucket as soon as its last
gradient is ready. A bucket closes once its size reaches the cap (the tensor that crosses the
cap stays in it, so a bucket can exceed the cap). Left at its default (25 MiB) the first bucket
is capped at 1 MiB; an explicit bucket_cap_mb caps every bucket the same (torch 2.13,
nn/parallel/distributed.py: _BucketCapacityConfig).

While backward runs, every bucket but the last can be hidden under the gradients still being
computed; the last bucket is issued only when backward ends, so its all-reduce is exposed:

    comm    = Σ_b ring(b)                      (each bucket pays 2(n−1)α: many small buckets cost latency)
    exposed = ring(last) + max(0, comm − ring(last) − backward)   (backward unknown: taken as long enough)
    hidden  = comm − exposed

Without overlap (no_sync, then one all-reduce of all gradients) everything is exposed:
comm = exposed = ring(G), hidden = 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from suite.costmodel.alphabeta import ring_allreduce_s

MIB = 1024 * 1024
DEFAULT_BUCKET_CAP_MB = 25.0
DEFAULT_FIRST_BUCKET_BYTES = 1 * MIB


def ddp_bucket_members(
    sizes_bytes: Sequence[int], cap_bytes: int, first_cap_bytes: int | None = None
) -> list[list[int]]:
    """Which gradients (indices into `sizes_bytes`, in gradient-ready order) each bucket holds, in all-reduce
    order."""
    limits = [first_cap_bytes if first_cap_bytes is not None else cap_bytes, cap_bytes]
    buckets: list[list[int]] = []
    current: list[int] = []
    filled = 0
    for index, size in enumerate(sizes_bytes):
        current.append(index)
        filled += size
        if filled >= (limits[0] if not buckets else limits[1]):
            buckets.append(current)
            current, filled = [], 0
    if current:
        buckets.append(current)
    return buckets


def ddp_bucket_layout(
    sizes_bytes: Sequence[int], cap_bytes: int, first_cap_bytes: int | None = None
) -> list[int]:
    """Bucket sizes, bytes, in the order they are all-reduced; `sizes_bytes` in gradient-ready order."""
    return [
        sum(sizes_bytes[i] for i in bucket)
        for bucket in ddp_bucket_members(sizes_bytes, cap_bytes, first_cap_bytes)
    ]


def caps_for(bucket_cap_mb: float | None) -> tuple[int, int]:
    """(cap, first-bucket cap) in bytes for a DDP bucket_cap_mb; None is DDP's default."""
    if bucket_cap_mb is None:
        return int(DEFAULT_BUCKET_CAP_MB * MIB), DEFAULT_FIRST_BUCKET_BYTES
    cap = int(bucket_cap_mb * MIB)
    return cap, cap


@dataclass(frozen=True)
class OverlapPrediction:
    comm_s: float
    """All-reduce time of every bucket, seconds."""
    exposed_s: float
    """Communication left on the step's critical path, seconds."""
    buckets: int

    @property
    def hidden_s(self) -> float:
        """Communication run under backward, seconds."""
        return self.comm_s - self.exposed_s


def overlap_prediction(
    buckets: Sequence[int], n: int, alpha_s: float, beta_Bps: float, backward_s: float | None = None
) -> OverlapPrediction:
    """α-β times of bucketed, overlapped all-reduces; backward_s bounds what can hide (None: unbounded)."""
    times = [ring_allreduce_s(b, n, alpha_s, beta_Bps) for b in buckets]
    if not times:
        return OverlapPrediction(0.0, 0.0, 0)
    comm = sum(times)
    hideable = comm - times[-1]
    exposed = times[-1] + (max(0.0, hideable - backward_s) if backward_s is not None else 0.0)
    return OverlapPrediction(comm_s=comm, exposed_s=exposed, buckets=len(buckets))


def no_overlap_prediction(grad_bytes: int, n: int, alpha_s: float, beta_Bps: float) -> OverlapPrediction:
    """One all-reduce of every gradient after backward: nothing hidden."""
    t = ring_allreduce_s(grad_bytes, n, alpha_s, beta_Bps)
    return OverlapPrediction(comm_s=t, exposed_s=t, buckets=1)


# ---------------------------------------------------------------- modes (torch-free: the stage reads them
# too)

NO_OVERLAP = "no_overlap"


@dataclass(frozen=True)
class OverlapMode:
    bucket_cap_mb: float | None
    """DDP bucket_cap_mb (MiB); None is DDP's default."""
    overlap: bool

    @classmethod
    def parse(cls, text: str) -> "OverlapMode":
        """'none' → no overlap; 'default' → DDP's default buckets; a number → that bucket_cap_mb."""
        if text == "none":
            return cls(bucket_cap_mb=None, overlap=False)
        if text == "default":
            return cls(bucket_cap_mb=None, overlap=True)
        return cls(bucket_cap_mb=float(text), overlap=True)

    @property
    def label(self) -> str:
        """The `overlap` column of a row: bucket_1MB, bucket_25MB (the default), bucket_0.01MB, no_overlap."""
        if not self.overlap:
            return NO_OVERLAP
        cap = 25.0 if self.bucket_cap_mb is None else self.bucket_cap_mb
        return f"bucket_{cap:g}MB"
