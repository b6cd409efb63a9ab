"""Typed readers of what earlier stages published (kept as JSON under the manifest's `facts`).

    ab = alpha_beta(facts, profile.device)   # → AlphaBeta(alpha_s, beta_Bps, source): the one rule
    peak = link_peak(facts)                  # → LinkPeak(per_gpu_GBps, kind, basis): the ring's slowest hop,
                                             # or None
    gpu = gpu(facts)                         # → the suite/hardware/gpus.py entry of the box's GPU model, or
                                             # None

Every stage reads facts through here, never through another stage's module: one fallback rule for
α and β, one link peak, one GPU model. Stages publish dataclasses (StageContext.publish stores them
as dicts, so the manifest stays JSON and a resumed run reads what a live one did).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import asdict, dataclass, field
from typing import Any, Mapping

from suite.config import Profile, profile_from_dict
from suite.costmodel import alphabeta as ab_model
from suite.hardware.gpus import Gpu, gpu_for
from suite.hardware.ring_peak import RingPeak, pcie_GBps, ring_peak

# α and β when the bandwidth stage published no fit: the checklist's worked example on GPUs (β the
# box's link peak when the topology is known); loopback gloo on CPUs (order of magnitude, never judged).
DEFAULT_ALPHA_S = {"cuda": 5e-6, "cpu": 30e-6}
DEFAULT_BETA_Bps = {"cuda": 200e9, "cpu": 2e9}
DEFAULT_BASIS = {
    "cuda": "no fitted α-β: CHECKLIST.md's worked example α = 5 µs, β = 200 GB/s",
    "cpu": "no fitted α-β: gloo over loopback, order of magnitude α = 30 µs, β = 2 GB/s",
}


@dataclass(frozen=True)
class AlphaBeta:
    """α (seconds per message) and β (bytes/s) a stage predicts with, and where they come from."""

    alpha_s: float
    beta_Bps: float
    source: str
    """One phrase: fitted by the bandwidth stage, the link peak, or the stated defaults."""
    fitted: bool = False
    across_nodes: bool = False
    """Whether it is the inter-node α-β (a collective over ranks on more than one node)."""

    def __iter__(self):
        """`alpha, beta, basis = alpha_beta(facts, device)`."""
        return iter((self.alpha_s, self.beta_Bps, self.source))


@dataclass(frozen=True)
class FittedAlphaBeta:
    """facts['alpha_beta'] as the bandwidth stage publishes it: the all_reduce fit later stages use."""

    alpha_s: float
    beta_Bps: float
    rms_rel_residual: float
    source: str
    """Which measurements: nccl-tests or torch."""
    world: int
    points: int
    collective: str = "all_reduce"
    algo: str = "ring"
    nccl_tests_form: str | None = None
    """Which form of nccl-tests measured it (mpirun -np N … -g 1, or one process -g N); None for torch's."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_facts(cls, facts: Mapping[str, Any], key: str = "alpha_beta") -> "FittedAlphaBeta | None":
        """The published fit (facts[key]: alpha_beta, or alpha_beta_intra on a multi-node run), or None when
        there is none or it has no usable β (0, ∞ or missing)."""
        fit = facts.get(key) or {}
        alpha, beta = fit.get("alpha_s"), fit.get("beta_Bps")
        if alpha is None or not beta or not math.isfinite(beta) or beta <= 0:
            return None
        return cls(
            alpha_s=float(alpha),
            beta_Bps=float(beta),
            rms_rel_residual=float(fit.get("rms_rel_residual", math.nan)),
            source=str(fit.get("source") or "?"),
            world=int(fit.get("world") or 0),
            points=int(fit.get("points") or 0),
            collective=fit.get("collective", "all_reduce"),
            algo=fit.get("algo", "ring"),
            nccl_tests_form=fit.get("nccl_tests_form"),
        )


@dataclass(frozen=True)
class LinkPeak:
    """The per-direction busbw a ring collective on this box is held to."""

    per_gpu_GBps: float
    kind: str
    """nvlink, pcie or sys (staged through host memory across CPUs: below-peak warns, never fails)."""
    basis: str

    @property
    def staged(self) -> bool:
        return self.kind == "sys"


@dataclass(frozen=True)
class TopologyFacts:
    """The part of facts['topology'] later stages read (the topology stage publishes more for the report)."""

    gpu_names: tuple[str, ...] = ()
    """`nvidia-smi -L` names, GPU0 first."""
    gpu_model: str | None = None
    links: Mapping[str, str] = field(default_factory=dict)
    """'GPU0-GPU1' → 'NV12', the upper triangle of `nvidia-smi topo -m`; empty when it was unreadable."""
    pcie: Mapping[str, tuple[int | None, int | None]] = field(default_factory=dict)
    """'GPU0' → (PCIe generation, width), the maxima `nvidia-smi -q` reports."""
    box: str | None = None
    """switched, nvlink-mesh, pcie or single (suite/stages/topology/rules.py)."""

    @property
    def matrix_gpus(self) -> list[str]:
        return sorted({g for pair in self.links for g in pair.split("-")}, key=lambda g: int(g[3:]))

    @classmethod
    def from_facts(cls, facts: Mapping[str, Any]) -> "TopologyFacts":
        topo = facts.get("topology") or {}
        pcie = topo.get("pcie") or {}
        per_gpu = {g: (v.get("gen"), v.get("width")) for g, v in (pcie.get("per_gpu") or {}).items()}
        links = dict(topo.get("links") or {})
        if not per_gpu and pcie.get("gen_max"):  # only the box-wide minimum is known: every GPU has it
            gpus = {g for pair in links for g in pair.split("-")}
            per_gpu = {g: (pcie.get("gen_max"), pcie.get("width_max")) for g in gpus}
        names = tuple(n for n in topo.get("gpus") or [] if n)
        model = topo.get("gpu_model") or (names[0] if names else None)
        return cls(gpu_names=names, gpu_model=model, links=links, pcie=per_gpu, box=topo.get("box"))


class Facts(Mapping[str, Any]):
    """What expect() and judge() are handed: the run's profile, typed (the runner's own object, never
    rebuilt from JSON), and what earlier stages published (for judge(), this stage's too), each read by a
    typed reader of this module (`TopologyFacts.from_facts`, `gpu`, `link_peak`, `alpha_beta`, `ingested`…)
    or, a stage's own record, by its key."""

    def __init__(self, profile: Profile, published: Mapping[str, Any] | None = None) -> None:
        self.profile = profile
        self._published = {k: v for k, v in (published or {}).items() if k != "profile"}

    @classmethod
    def of(cls, facts: Mapping[str, Any]) -> "Facts":
        """`facts` itself, or a plain mapping as a test writes one (the profile as a dict under 'profile')."""
        if isinstance(facts, Facts):
            return facts
        return cls(profile_from_dict(facts["profile"]), facts)

    def with_published(self, published: Mapping[str, Any]) -> "Facts":
        """These facts and what the stage that just ran published (judge() reads both)."""
        return Facts(self.profile, {**self._published, **published})

    def __getitem__(self, key: str) -> Any:
        return self._published[key]

    def __iter__(self):
        return iter(self._published)

    def __len__(self) -> int:
        return len(self._published)

    def __repr__(self) -> str:
        return f"Facts(profile={self.profile.name!r}, published={sorted(self._published)})"


def profile(facts: Mapping[str, Any]) -> Profile:
    """The profile this run runs: the runner's own (Facts), or a plain mapping's 'profile' rebuilt."""
    return Facts.of(facts).profile


def ingested(facts: Mapping[str, Any]) -> bool:
    """The run judges captured outputs (`suite ingest` published what they hold), not its own measures."""
    return bool(facts.get("ingest"))


def baseline_step_s(facts: Mapping[str, Any]) -> float | None:
    """One training step on one GPU, seconds, as the baseline stage measured it; None before it ran."""
    return (facts.get("baseline") or {}).get("step_time_s")


def profile_or_none(facts: Mapping[str, Any]) -> Profile | None:
    """profile(facts); None where a plain mapping records none (a judge called on rows alone)."""
    return Facts.of(facts).profile if isinstance(facts, Facts) or facts.get("profile") else None


def gpu_model(facts: Mapping[str, Any]) -> str | None:
    """The GPU model the topology stage found (its most common `nvidia-smi -L` name), if any."""
    return TopologyFacts.from_facts(facts).gpu_model


def gpu(facts: Mapping[str, Any]) -> Gpu | None:
    """The GPU table's entry for the box's model; None for an unknown or absent GPU."""
    return gpu_for(gpu_model(facts))


def link_peak_or_why(facts: Mapping[str, Any]) -> tuple[LinkPeak | None, str]:
    """The box's ring peak from the topology stage's matrix and PCIe facts; (None, why) without them."""
    topo = TopologyFacts.from_facts(facts)
    name, entry = topo.gpu_model, gpu_for(topo.gpu_model)
    if name is None:
        return None, "no GPU model in the topology facts"
    gpus = topo.matrix_gpus
    if gpus:
        ring: RingPeak | None = ring_peak(gpus, topo.links, entry, topo.pcie)
        if ring is None:
            return (
                None,
                f"no link rate known for every hop of {name}'s matrix (not in suite/hardware/gpus.py?)",
            )
        staged = without_p2p(facts)
        if staged and ring.kind != "nvlink":  # NCCL stages these pairs through host memory: the staged floor
            return LinkPeak(
                ring.per_gpu_GBps,
                "sys",
                f"{ring.basis}; no P2P ({staged}): staged through host memory ({name})",
            ), ""
        return LinkPeak(ring.per_gpu_GBps, ring.kind, f"{ring.basis} ({name})"), ""
    # No matrix (topo -m unreadable): the PCIe link the GPUs report, else the model's generation.
    pcie = (facts.get("topology") or {}).get("pcie") or {}
    gen = pcie.get("gen_max") or (entry.pcie_gen if entry else None)
    rate = pcie_GBps(gen, pcie.get("width_max"))
    if rate is None:
        return None, f"no link peak known for {name}"
    return LinkPeak(
        rate,
        "pcie",
        f"no topology matrix: PCIe Gen{gen} x{pcie.get('width_max') or 16} "
        f"= {rate:g} GB/s per direction ({name})",
    ), ""


def without_p2p(facts: Mapping[str, Any]) -> str:
    """'GPU0-GPU1 GNS, …': the pairs `nvidia-smi topo -p2p r` shows without P2P ('' when none or not read)."""
    pairs = (facts.get("topology") or {}).get("p2p") or {}
    bad = [f"{p} {s}" for p, s in pairs.items() if s != "OK"]
    return ", ".join(bad[:3]) + (f" and {len(bad) - 3} more" if len(bad) > 3 else "")


def link_peak(facts: Mapping[str, Any]) -> LinkPeak | None:
    return link_peak_or_why(facts)[0]


def alpha_beta(facts: Mapping[str, Any], device: str) -> AlphaBeta:
    """The one rule: the bandwidth stage's fit; else on GPUs α = 5 µs with β = the link peak; else the
    defaults."""
    fit = FittedAlphaBeta.from_facts(facts)
    if fit is not None:
        return _fitted(fit)
    return _unfitted(facts, device)


def _fitted(fit: FittedAlphaBeta, which: str = "", across_nodes: bool = False) -> AlphaBeta:
    return AlphaBeta(
        fit.alpha_s,
        fit.beta_Bps,
        f"α = {fit.alpha_s * 1e6:.3g} µs, β = {fit.beta_Bps / 1e9:.3g} "
        f"GB/s fitted by the bandwidth stage from {fit.source} all_reduce"
        + (f" ({fit.nccl_tests_form})" if fit.nccl_tests_form else "")
        + (f" ({which})" if which else ""),
        fitted=True,
        across_nodes=across_nodes,
    )


def _unfitted(facts: Mapping[str, Any], device: str) -> AlphaBeta:
    """On GPUs α = 5 µs with β = the link peak; else the defaults."""
    key = "cuda" if device == "cuda" else "cpu"
    peak = link_peak(facts) if key == "cuda" else None
    if peak is not None:
        return AlphaBeta(
            DEFAULT_ALPHA_S[key],
            peak.per_gpu_GBps * 1e9,
            f"no fitted α-β: α = {DEFAULT_ALPHA_S[key] * 1e6:g} µs; β = {peak.basis}",
        )
    return AlphaBeta(DEFAULT_ALPHA_S[key], DEFAULT_BETA_Bps[key], DEFAULT_BASIS[key])


def alpha_beta_at(facts: Mapping[str, Any], profile: Profile, degree: int) -> AlphaBeta:
    """The α-β a collective over ranks 0…degree−1 is predicted with (dp, zero): on one node alpha_beta()'s. On
    a multi-node profile (ranks node-major, nproc per node), where facts['alpha_beta'] is the fit over the
    whole world and so across nodes: a degree within a node takes facts['alpha_beta_intra'] (each node's
    intra-node sweep), else the link peak or the defaults, never the cross-node fit; a degree spanning nodes
    takes facts['alpha_beta'], else the defaults with the NICs' usual rate (ab_model.INTER_NODE_BETA_Bps on
    GPUs). The source says which."""
    nodes = len(profile.nodes)
    if nodes <= 1:
        return alpha_beta(facts, profile.device)
    if degree <= profile.nproc:
        fit = FittedAlphaBeta.from_facts(facts, "alpha_beta_intra")
        if fit is not None:
            return _fitted(fit, "the intra-node fit")
        unfitted = _unfitted(facts, profile.device)
        return dataclasses.replace(
            unfitted, source=f"no intra-node fit: {unfitted.source.removeprefix('no fitted α-β: ')}"
        )
    spanned = ab_model.nodes_spanned(degree, profile.nproc)
    fit = FittedAlphaBeta.from_facts(facts)
    if fit is not None:
        return _fitted(fit, f"the inter-node fit over all {nodes} nodes", across_nodes=True)
    key = "cuda" if profile.device == "cuda" else "cpu"
    if key == "cuda":
        return AlphaBeta(
            DEFAULT_ALPHA_S[key],
            ab_model.INTER_NODE_BETA_Bps,
            f"no inter-node fit: α = {DEFAULT_ALPHA_S[key] * 1e6:g} µs; β = "
            f"{ab_model.INTER_NODE_BETA_Bps / 1e9:g} "
            f"GB/s per GPU, {ab_model.INTER_NODE_BASIS} ({spanned} nodes)",
            across_nodes=True,
        )
    return AlphaBeta(
        DEFAULT_ALPHA_S[key],
        DEFAULT_BETA_Bps[key],
        f"no inter-node fit: {DEFAULT_BASIS[key].removeprefix('no fitted α-β: ')} ({spanned} nodes)",
        across_nodes=True,
    )


def usable_gpus(facts: Mapping[str, Any]) -> int | None:
    """GPUs the health stage found fit to run (no pending remap or reset, MIG off, not fallen off the bus);
    None where health did not run or the profile is a CPU one. A rule that skips GPU stages reads this."""
    count = facts.get("health", {}).get("usable_gpus")
    return int(count) if isinstance(count, (int, float)) and not isinstance(count, bool) else None
