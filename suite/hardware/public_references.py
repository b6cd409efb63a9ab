"""Where a run stands against the best published figures for its GPU model and box layout.

    for s in standing(facts, rows):
        s.line   # "all_reduce busbw 468.6 GB/s at 2 GiB = 98 % of the best public 8×H100 SXM figure,
                 #  480 GB/s (NCCL with NVLS, …; NVIDIA/nccl-tests#212; NVIDIA/nccl#2140)"

The figures are data (public_references.toml, each with its source); this module only matches a run to them
and reads the run's own figure of the same kind (READERS). A figure is the best seen in public, never a
floor: the verdicts keep their own rules, and a share here judges nothing. A model with no published figure
says so (`no_reference_line`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Callable, Mapping

import pandas as pd
import tomllib

from suite.facts import TopologyFacts, gpu
from suite.headlines import size

REFERENCES = Path(__file__).with_name("public_references.toml")
FIELDS = {"gpu", "gpus", "metric", "value", "unit", "how", "source", "quoted", "at_least_bytes", "range"}


@dataclass(frozen=True)
class Reference:
    gpu: str
    gpus: int
    metric: str
    value: float
    unit: str
    how: str
    source: str
    quoted: str
    at_least_bytes: int = 0
    range: tuple[float, float] | None = None


@dataclass(frozen=True)
class Measured:
    value: float
    what: str
    """How the run's figure was read: 'at ≥ 1 GiB', 'median of 8 GPUs'."""


@dataclass(frozen=True)
class Standing:
    reference: Reference
    measured: Measured

    @property
    def share(self) -> float:
        return self.measured.value / self.reference.value

    @property
    def line(self) -> str:
        r, m = self.reference, self.measured
        layout = f"{r.gpus}×{r.gpu}" if r.gpus > 1 else r.gpu
        share = f"{self.share * 100:.0f} %"
        return (
            f"{LABELS[r.metric]} {m.value:,.1f} {r.unit} {m.what} = {share} of the best public {layout} "
            f"figure, {r.value:,.0f} {r.unit} ({r.how}; {r.source})"
        )


def _all_reduce_busbw(rows: pd.DataFrame, ref: Reference) -> Measured | None:
    """The best all_reduce bus bandwidth of the bandwidth stage at or above the reference's size, over every
    GPU of the box (nccl-tests or the torch sweep, whichever measured more)."""
    found = rows[
        (rows["stage"] == "bandwidth")
        & (rows["case"] == "all_reduce")
        & (rows["metric"] == "busbw")
        & (rows["size_bytes"].fillna(0) >= ref.at_least_bytes)
        & (rows["world"] == ref.gpus)
    ].dropna(subset=["value"])
    if found.empty:
        return None
    best = found.loc[found["value"].idxmax()]
    return Measured(float(best["value"]), f"at {size(int(best['size_bytes']))}")


def _per_gpu_median(case: str, metric: str, dtype: str | None = None):
    def read(rows: pd.DataFrame, ref: Reference) -> Measured | None:
        mine = (rows["stage"] == "burnin") & (rows["case"] == case) & (rows["metric"] == metric)
        if dtype is not None:
            mine &= rows["dtype"] == dtype
        values = rows.loc[mine, "value"].dropna()
        if values.empty:
            return None
        n = len(values)
        return Measured(float(values.median()), "on the one GPU" if n == 1 else f"(median of {n} GPUs)")

    return read


READERS: dict[str, Callable[[pd.DataFrame, Reference], Measured | None]] = {
    "all_reduce.busbw": _all_reduce_busbw,
    "hbm.copy": _per_gpu_median("hbm", "copy_GBps"),
    "gemm.bf16": _per_gpu_median("gemm", "tflops", "bfloat16"),
}
LABELS = {"all_reduce.busbw": "all_reduce busbw", "hbm.copy": "HBM copy", "gemm.bf16": "bf16 GEMM"}
UNITS = {"all_reduce.busbw": "GB/s", "hbm.copy": "GB/s", "gemm.bf16": "TFLOP/s"}


@cache
def references() -> tuple[Reference, ...]:
    """Every figure of public_references.toml; ValueError naming the entry that is not of the schema."""
    data = tomllib.loads(REFERENCES.read_text())
    out = []
    for i, entry in enumerate(data.get("reference", [])):
        unknown = set(entry) - FIELDS
        missing = {"gpu", "gpus", "metric", "value", "unit", "how", "source", "quoted"} - set(entry)
        if unknown or missing or entry["metric"] not in READERS:
            raise ValueError(
                f"{REFERENCES.name} reference {i + 1}: unknown {sorted(unknown)}, missing {sorted(missing)}, "
                f"metric {entry.get('metric')!r} (known: {sorted(READERS)})"
            )
        rng = entry.get("range")
        out.append(Reference(**{**entry, "range": tuple(rng) if rng else None}))
    return tuple(out)


def box_of(facts: Mapping) -> tuple[str | None, int]:
    """(the GPU table's model, the GPUs in the box) from the topology facts; (None, 0) without them."""
    entry, topo = gpu(facts), TopologyFacts.from_facts(facts)
    return (entry.model if entry else None), len(topo.matrix_gpus or topo.gpu_names)


def applies(ref: Reference, model: str | None, count: int) -> bool:
    """The reference is for this model and, for a whole-box figure, this many GPUs."""
    return ref.gpu == model and (ref.gpus == 1 or ref.gpus == count)


def standing(facts: Mapping, rows: pd.DataFrame) -> list[Standing]:
    """Each figure the run measured (its rows as a frame, as the report reads them) that has a published
    reference for its model (and, for a whole-box figure, its layout), in the order of
    public_references.toml."""
    model, count = box_of(facts)
    if rows.empty:
        return []
    out = []
    for ref in references():
        if not applies(ref, model, count):
            continue
        measured = READERS[ref.metric](rows, ref)
        if measured is not None and measured.value > 0:
            out.append(Standing(ref, measured))
    return out


def measure(rows: pd.DataFrame, model: str | None, count: int) -> dict[str, Measured]:
    """Every figure of READERS' kinds the rows hold, read as the references are (all_reduce at ≥ 1 GiB over
    `count` GPUs), whether or not the model has a reference."""
    if rows.empty:
        return {}
    out = {}
    for metric, read in READERS.items():
        found = read(rows, Reference(model or "", count or 1, metric, 1.0, "", "", "", "", 1 << 30))
        if found is not None and found.value > 0:
            out[metric] = found
    return out


def unreferenced(facts: Mapping, rows: pd.DataFrame) -> list[tuple[str, str]]:
    """(metric, line) for each figure of READERS' kinds the run measured that has no published reference for
    its model and layout: "all_reduce busbw 212.0 GB/s at 8 GiB: no public figure for 8×A100 SXM here"."""
    model, count = box_of(facts)
    if model is None or rows.empty:
        return []
    have = {r.metric for r in references() if applies(r, model, count)}
    out = []
    for metric, measured in measure(rows, model, count).items():
        if metric not in have:
            layout = f"{count}×{model}" if metric == "all_reduce.busbw" and count > 1 else model
            figure = f"{LABELS[metric]} {measured.value:,.1f} {UNITS[metric]} {measured.what}"
            out.append((metric, f"{figure}: no public figure for {layout} in {REFERENCES.name}"))
    return out


def no_reference_line(facts: Mapping) -> str | None:
    """Said when the box's model has no published figure here at all; None when it has (or no model)."""
    model, _ = box_of(facts)
    if model is None or any(r.gpu == model for r in references()):
        return None
    return f"no public reference figure for {model} in suite/hardware/public_references.toml"
