"""The α-β cost model of collectives, its least-squares fit, and the link peaks a measurement is held to.

    python -m suite model --alpha 5e-6 --beta 200e9 --cards 4 8 --sizes 4K 4M 1G

One message step costs α + S/β: α the per-step latency (seconds), β the link bandwidth
(bytes/s). Every collective is a number of such steps:

    ring all-reduce      2(n−1) steps of S/n      → 2(n−1)(α + S/(nβ))
    binary-tree all-red. 2⌈log₂n⌉ steps of S      → 2⌈log₂n⌉(α + S/β)   (reduce up, broadcast down)
    all-gather, reduce-scatter, all-to-all (ring): (n−1)(α + S/(nβ))    (S: the whole buffer)
    broadcast, send/recv (pipelined):              α + S/β

Worked figures (CHECKLIST.md), α = 5 µs, β = 200 GB/s: 4 cards, 4 KB → ring 30.0 µs, tree
20.1 µs; 4 cards, 4 MB → ring 61.5 µs, tree 103.9 µs; 8 cards, 1 GB → ring 9465.2 µs.

Bus bandwidth (nccl-tests): busbw = algbw × factor, algbw = S / t. The factor makes busbw
comparable with a link's peak whatever n: all-reduce 2(n−1)/n (each byte crosses the ring
twice, less the local share); all-gather, reduce-scatter, all-to-all (n−1)/n; broadcast,
reduce, send/recv 1.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

# ---------------------------------------------------------------- step counts and bus bandwidth

COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "reduce", "sendrecv")


def _check(collective: str) -> str:
    name = collective.replace("alltoall", "all_to_all").replace("send_recv", "sendrecv")
    if name not in COLLECTIVES:
        raise ValueError(f"unknown collective {collective!r}: one of {', '.join(COLLECTIVES)}")
    return name


def busbw_factor(collective: str, n: int) -> float:
    """nccl-tests' bus-bandwidth factor for `collective` over n ranks."""
    name = _check(collective)
    if name == "all_reduce":
        return 2 * (n - 1) / n
    if name in ("all_gather", "reduce_scatter", "all_to_all"):
        return (n - 1) / n
    return 1.0


def algbw_GBps(size_bytes: float, time_s: float) -> float:
    """Algorithm bandwidth, GB/s (1e9 bytes): the whole buffer S over the time."""
    return size_bytes / time_s / 1e9 if time_s > 0 else float("nan")


def busbw_GBps(collective: str, size_bytes: float, time_s: float, n: int) -> float:
    """Bus bandwidth, GB/s: algbw × busbw_factor."""
    return algbw_GBps(size_bytes, time_s) * busbw_factor(collective, n)


# ---------------------------------------------------------------- times


def ring_allreduce_s(size_bytes: float, n: int, alpha_s: float, beta_Bps: float) -> float:
    """Ring all-reduce: reduce-scatter then all-gather, 2(n−1) steps of S/n."""
    if n <= 1:
        return 0.0
    return 2 * (n - 1) * (alpha_s + size_bytes / (n * beta_Bps))


def tree_allreduce_s(size_bytes: float, n: int, alpha_s: float, beta_Bps: float) -> float:
    """Binary-tree all-reduce: reduce up then broadcast down, 2⌈log₂n⌉ steps of the whole S."""
    if n <= 1:
        return 0.0
    return 2 * math.ceil(math.log2(n)) * (alpha_s + size_bytes / beta_Bps)


def collective_time_s(
    collective: str, size_bytes: float, n: int, alpha_s: float, beta_Bps: float, algo: str = "ring"
) -> float:
    """Predicted time of one collective over n ranks; S is the whole buffer as nccl-tests counts it."""
    name = _check(collective)
    if n <= 1:
        return 0.0
    if name == "all_reduce":
        return (
            tree_allreduce_s(size_bytes, n, alpha_s, beta_Bps)
            if algo == "tree"
            else ring_allreduce_s(size_bytes, n, alpha_s, beta_Bps)
        )
    if name in ("all_gather", "reduce_scatter", "all_to_all"):
        return (n - 1) * (alpha_s + size_bytes / (n * beta_Bps))
    return alpha_s + size_bytes / beta_Bps


def crossover_bytes(n: int, alpha_s: float, beta_Bps: float) -> float | None:
    """Message size at which ring and tree all-reduce take equal time (tree faster below it).

    Equal when 2(n−1)(α + S/(nβ)) = 2L(α + S/β), L = ⌈log₂n⌉, so
    S = αβ (L − (n−1)) / ((n−1)/n − L). None when there is no positive crossover (n ≤ 2: ring never loses).
    """
    if n <= 2:
        return None
    levels = math.ceil(math.log2(n))
    numerator = levels - (n - 1)
    denominator = (n - 1) / n - levels
    size = alpha_s * beta_Bps * numerator / denominator
    return size if size > 0 else None


def split_counts(count: int, n: int) -> list[int]:
    """Elements of each of n chunks of a count-element buffer, as torch.tensor_split cuts it (first count % n
    get one more)."""
    base, extra = divmod(count, n)
    return [base + (1 if i < extra else 0) for i in range(n)]


def ring_allreduce_bytes(count: int, n: int, elem_bytes: int, rank: int) -> tuple[int, int]:
    """(sent, received) bytes of one rank in a ring all-reduce of count elements.

    Reduce-scatter step s (s = 0…n−2) sends chunk (r−s) mod n and receives (r−s−1) mod n; all-gather
    step s sends (r+1−s) mod n and receives (r−s) mod n. So a rank sends every chunk but (r+1) mod n,
    then every chunk but (r+2) mod n, and receives every chunk but r, then every chunk but (r+1) mod n.
    Even chunks: 2(n−1)·S/n each way.
    """
    if n <= 1:
        return 0, 0
    c = split_counts(count, n)
    sent = 2 * count - c[(rank + 1) % n] - c[(rank + 2) % n]
    received = 2 * count - c[rank] - c[(rank + 1) % n]
    return sent * elem_bytes, received * elem_bytes


def binomial_children(rank: int, n: int) -> list[int]:
    """Children of `rank` in the binomial tree rooted at 0: rank + 2^k for every 2^k below rank's lowest set
    bit."""
    out, mask = [], 1
    while mask < n and (rank == 0 or mask < (rank & -rank)):
        if rank + mask < n:
            out.append(rank + mask)
        mask <<= 1
    return out


def tree_allreduce_bytes(count: int, n: int, elem_bytes: int, rank: int) -> tuple[int, int]:
    """(sent, received) bytes of one rank in a binomial-tree all-reduce (reduce to 0, broadcast back): the
    whole buffer once each way over every tree edge — to and from its parent (rank ≠ 0) and each child.
    Summed over ranks: 2(n−1)·S each way."""
    messages = len(binomial_children(rank, n)) + (1 if rank else 0)
    return messages * count * elem_bytes, messages * count * elem_bytes


# ---------------------------------------------------------------- across nodes


INTER_NODE_BETA_Bps = 50e9
"""β across nodes where nothing was measured, bytes/s per GPU: NIC line rate × NICs per node ÷ GPUs per node,
for the usual H100 cluster node (8 × 400 Gb/s NICs for 8 GPUs: 50 GB/s); make plan's --inter-node default
too."""
INTER_NODE_BASIS = "the usual 8 × 400 Gb/s NICs of an 8-GPU node"


def nodes_spanned(n: int, per_node: int) -> int:
    """Nodes that ranks 0…n−1 occupy when ranks are node-major (per_node ranks on each node)."""
    return max(1, math.ceil(n / max(per_node, 1)))


def allreduce_across_nodes_s(
    size_bytes: float, n: int, per_node: int, intra: tuple[float, float], inter: tuple[float, float]
) -> float:
    """All-reduce over ranks 0…n−1, per_node ranks on each node (node-major); intra and inter are (α s, β
    B/s).

    Within one node (n ≤ per_node), CHECKLIST.md's ring over the node's links: 2(n−1)(α_i + S/(nβ_i)).
    Across k = ⌈n/per_node⌉ nodes, the same ring at the inter-node α and β:
        t = 2(n−1)(α_e + S/(nβ_e))
    Why: any all-reduce that spans nodes is bounded by the node boundary. A ring moves at its slowest hop,
    the NIC. A hierarchical one (reduce-scatter inside each node, the shards all-reduced across the k nodes
    on per_node rails at once, all-gather inside) is faster inside, but its cross-node phase still crosses
    the same NICs, so its bandwidth term is again set by β_e. And β_e is not a guess: it is the bandwidth
    stage's fit over the whole world's all_reduce on a multi-node run, of whichever algorithm NCCL chose
    there (its busbw ≈ NIC line rate × NICs per node), so at n = the world this returns the all_reduce that
    was measured, and below it scales as the ring does. Checked against CHECKLIST.md: with α_i = α_e and
    β_i = β_e it is the ring at every n (8 cards, 1 GiB, α = 5 µs, β = 200 GB/s: 9465.2 µs).
    """
    alpha, beta = intra if n <= per_node else inter
    return ring_allreduce_s(size_bytes, n, alpha, beta)


# ---------------------------------------------------------------- training communication


def dp_step_comm_s(grad_bytes: float, n: int, alpha_s: float, beta_Bps: float) -> float:
    """Data parallelism: one ring all-reduce of all gradients per step (unbucketed, unoverlapped)."""
    return ring_allreduce_s(grad_bytes, n, alpha_s, beta_Bps)


def dp_comm_share(grad_bytes: float, n: int, compute_step_s: float, alpha_s: float, beta_Bps: float) -> float:
    """Fraction of an unoverlapped DP step spent communicating: comm / (compute + comm)."""
    comm = dp_step_comm_s(grad_bytes, n, alpha_s, beta_Bps)
    return comm / (compute_step_s + comm) if compute_step_s + comm > 0 else 0.0


# A ring all-reduce is a reduce-scatter plus an all-gather; each is half of it. Per step:
#   ZeRO-1: gradients all-reduced (or reduce-scattered), updated shards all-gathered  → 1 all-reduce
#   ZeRO-2: gradients reduce-scattered, parameters all-gathered                       → 1 all-reduce
#   ZeRO-3: parameters all-gathered for forward and again for backward, gradients reduce-scattered → 1.5
ZERO_COMM_ALLREDUCES = {0: 1.0, 1: 1.0, 2: 1.0, 3: 1.5}


def zero_step_comm_s(stage: int, param_bytes: float, n: int, alpha_s: float, beta_Bps: float) -> float:
    """Communication per step of ZeRO stage 0 (plain DDP) to 3, in all-reduce equivalents of the
    parameters."""
    return ZERO_COMM_ALLREDUCES[stage] * ring_allreduce_s(param_bytes, n, alpha_s, beta_Bps)


def zero_memory_bytes(
    params: int, n: int, stage: int, *, param_bytes: int = 2, grad_bytes: int = 2, optimizer_bytes: int = 12
) -> float:
    """Model-state memory per rank under ZeRO (activations excluded).

    Mixed-precision AdamW: 2 (bf16 params) + 2 (bf16 grads) + 12 (fp32 master, m, v) = 16Ψ bytes;
    pure fp32 AdamW: 4 + 4 + 8 = 16Ψ as well. ZeRO-1 shards the optimizer state, ZeRO-2 also the
    gradients, ZeRO-3 also the parameters: 16Ψ → … → 16Ψ/N.
    """
    p, g, o = params * param_bytes, params * grad_bytes, params * optimizer_bytes
    if stage == 0:
        return p + g + o
    if stage == 1:
        return p + g + o / n
    if stage == 2:
        return p + (g + o) / n
    if stage == 3:
        return (p + g + o) / n
    raise ValueError(f"ZeRO stage {stage} unknown: 0 (DDP), 1, 2 or 3")


# ---------------------------------------------------------------- fit


@dataclass(frozen=True)
class Fit:
    """A least-squares fit of t = a + b·S, and the α, β it implies for the chosen algorithm."""

    alpha_s: float
    beta_Bps: float
    intercept_s: float
    slope_s_per_byte: float
    rms_rel_residual: float
    """Root-mean-square of (measured − fitted) / measured over the points."""
    points: int


def fit_line(sizes: Sequence[float], times: Sequence[float], weighted: bool = True) -> tuple[float, float]:
    """Least squares t = a + b·S. Weighted by 1/t so small messages (α's domain) count as much as large
    (β's)."""
    if len(sizes) != len(times) or len(sizes) < 2:
        raise ValueError("a fit needs at least two (size, time) points")
    w = [1.0 / t if weighted and t > 0 else 1.0 for t in times]
    sw = sum(x * x for x in w)
    sx = sum(wi * wi * s for wi, s in zip(w, sizes))
    sy = sum(wi * wi * t for wi, t in zip(w, times))
    sxx = sum(wi * wi * s * s for wi, s in zip(w, sizes))
    sxy = sum(wi * wi * s * t for wi, s, t in zip(w, sizes, times))
    det = sw * sxx - sx * sx
    if det == 0:
        raise ValueError("a fit needs at least two distinct sizes")
    b = (sw * sxy - sx * sy) / det
    a = (sy - b * sx) / sw
    return a, b


def step_shape(collective: str, n: int, algo: str = "ring") -> tuple[float, float]:
    """(k, c) with t = k·α + c·S/β for the collective: the fit's intercept is k·α, its slope c/β."""
    name = _check(collective)
    if name == "all_reduce":
        if algo == "tree":
            levels = 2 * math.ceil(math.log2(n))
            return levels, levels
        return 2 * (n - 1), 2 * (n - 1) / n
    if name in ("all_gather", "reduce_scatter", "all_to_all"):
        return n - 1, (n - 1) / n
    return 1.0, 1.0


def fit_alpha_beta(
    collective: str, n: int, sizes: Sequence[float], times_s: Sequence[float], algo: str = "ring"
) -> Fit:
    """α and β from measured (size, time) points of one collective, by least squares on t = kα + cS/β."""
    a, b = fit_line(sizes, times_s)
    k, c = step_shape(collective, n, algo)
    alpha = max(a, 0.0) / k
    beta = c / b if b > 0 else float("inf")
    fitted = [a + b * s for s in sizes]
    rel = [(t - f) / t for t, f in zip(times_s, fitted) if t > 0]
    rms = math.sqrt(sum(r * r for r in rel) / len(rel)) if rel else float("nan")
    return Fit(
        alpha_s=alpha,
        beta_Bps=beta,
        intercept_s=a,
        slope_s_per_byte=b,
        rms_rel_residual=rms,
        points=len(sizes),
    )
