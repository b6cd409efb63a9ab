"""The per-direction peak a ring collective can reach on a box: the rate of its slowest hop.

    peak = ring_peak(topology.gpus, topology.links, gpu_for("NVIDIA H100 NVL"), pcie={"GPU0": (5, 16), …})
    peak.per_gpu_GBps, peak.hop, peak.kind      # → 63.0, 'GPU1-GPU2 SYS', 'sys'

A ring all-reduce moves every byte over every hop of the ring, so it runs at its slowest hop. The
ring is the one a library would pick: of all rings through every GPU, the one whose slowest hop is
fastest (searched exhaustively over the matrix; NCCL searches the same graph). A hop's rate is
  NV#                     # × the GPU's per-link NVLink rate (only an all-NVLink ring gets an NVLink peak),
  PIX, PXB, PHB, NODE     the PCIe generation × width of the slower of its two GPUs,
  SYS, SOC                the same PCIe bound, staged through host memory across the CPU interconnect:
                          the interconnect can cut it further, so the bandwidth stage warns, never fails.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from suite.hardware.gpus import Gpu, PCIE_X16_GBps
from suite.parsers.topo import nvlink_count

CROSS_CPU_LINKS = ("SYS", "SOC")  # SOC is the pre-2017 name of SYS
_SEARCH_BUDGET = 200_000  # DFS steps per threshold: far more than 8 GPUs need; a 16-GPU mesh stays bounded


@dataclass(frozen=True)
class Hop:
    pair: str
    link: str
    GBps: float
    kind: str
    """nvlink, pcie or sys."""
    how: str

    @property
    def score(self) -> tuple[float, int]:
        """Faster first; at equal rate a direct PCIe hop ranks above one staged through host memory."""
        return self.GBps, 0 if self.kind == "sys" else 1


@dataclass(frozen=True)
class RingPeak:
    per_gpu_GBps: float
    """Per direction, GB/s: the slowest hop of the best ring."""
    kind: str
    """nvlink (every hop NVLink), pcie, or sys (a hop staged through host memory across CPUs)."""
    hop: str
    """The slowest hop and its link: 'GPU1-GPU2 SYS'."""
    basis: str
    """One phrase saying where the figure comes from."""
    ring: tuple[str, ...] = ()

    @property
    def staged(self) -> bool:
        return self.kind == "sys"


def pcie_GBps(gen: int | None, width: int | None) -> float | None:
    """Per direction over one PCIe link: the x16 rate × width/16; None for an unknown generation."""
    x16 = PCIE_X16_GBps.get(gen) if gen else None
    return None if x16 is None else x16 * (width or 16) / 16


def hop_rate(
    pair: str, link: str, gpu: Gpu | None, pcie: Mapping[str, tuple[int | None, int | None]]
) -> Hop | None:
    count = nvlink_count(link)
    if count:
        rate = gpu.nvlink_per_link_GBps if gpu else None
        if rate is None:
            return None
        return Hop(pair, link, count * rate, "nvlink", f"{count} × {rate:g} GB/s NVLink {gpu.nvlink}")
    a, b = pair.split("-")
    default = (gpu.pcie_gen if gpu else None, 16)
    ends = [pcie.get(g) or default for g in (a, b)]
    gen = min((e[0] for e in ends if e[0]), default=None)
    width = min((e[1] for e in ends if e[1]), default=16)
    rate = pcie_GBps(gen, width)
    if rate is None:
        return None
    if link in CROSS_CPU_LINKS:
        return Hop(
            pair,
            link,
            rate,
            "sys",
            f"staged through host memory across the CPUs, bounded by PCIe Gen{gen} x{width}",
        )
    return Hop(pair, link, rate, "pcie", f"PCIe Gen{gen} x{width}")


def ring_peak(
    gpus: list[str],
    links: Mapping[str, str],
    gpu: Gpu | None,
    pcie: Mapping[str, tuple[int | None, int | None]] | None = None,
) -> RingPeak | None:
    """The best ring's slowest hop over the GPU×GPU matrix; None with fewer than 2 GPUs or a hop of unknown
    rate."""
    if len(gpus) < 2:
        return None
    hops: dict[frozenset, Hop] = {}
    for pair, link in links.items():
        hop = hop_rate(pair, link, gpu, pcie or {})
        if hop is None:
            return None
        hops[frozenset(pair.split("-"))] = hop
    for threshold in sorted({h.score for h in hops.values()}, reverse=True):
        ring = _ring_at_least(gpus, hops, threshold)
        if ring is not None:
            steps = [hops[frozenset((ring[i], ring[(i + 1) % len(ring)]))] for i in range(len(ring))]
            # the slowest hop; of equally slow ones, a host-memory-staged one (it sets the verdict's kind)
            slow = min(steps, key=lambda h: h.score)
            return RingPeak(
                slow.GBps,
                slow.kind,
                f"{slow.pair} {slow.link}",
                f"ring {'→'.join(ring)}: slowest hop {slow.pair} {slow.link}, {slow.how} "
                f"= {slow.GBps:g} GB/s per direction",
                tuple(ring),
            )
    return None


def _ring_at_least(
    gpus: list[str], hops: Mapping[frozenset, Hop], threshold: tuple[float, int]
) -> list[str] | None:
    """A Hamiltonian cycle using only hops scoring ≥ threshold (depth-first, bounded), or None."""
    n = len(gpus)
    ok = {g: [h for h in gpus if h != g and hops[frozenset((g, h))].score >= threshold] for g in gpus}
    start = gpus[0]
    path, seen, steps = [start], {start}, 0

    def extend() -> bool:
        nonlocal steps
        steps += 1
        if steps > _SEARCH_BUDGET:
            return False
        if len(path) == n:
            return n == 2 or start in ok[path[-1]]
        for nxt in ok[path[-1]]:
            if nxt not in seen:
                path.append(nxt)
                seen.add(nxt)
                if extend():
                    return True
                path.pop()
                seen.discard(nxt)
        return False

    return list(path) if extend() else None
