"""The stage's folder: this declaration; beside it what only this stage runs (figure.py: its figures).
Imported by suite.stages' discovery (runner, plan, ingest, reports); it imports no other stage. Pinned memory
and copy/compute overlap on one card: pageable vs pinned both ways, a side-stream copy under a GEMM.

    python -m suite run --stages pinned --profile nccl-1gpu

Runs in the stage's own process (suite/stages/pinned/worker.py). The expected copy rate is the card's PCIe
link, generation × width as `nvidia-smi -q` reports them (the topology stage's facts; else the GPU table's
generation at x16): pinned copies should reach 70 % of it per direction, pageable ones fall short (they are
staged through a driver buffer). A pinned copy on a side stream should hide under a GEMM of the same length
(overlap ≥ 0.8); a pageable one cannot (cudaMemcpyAsync from pageable memory is synchronous).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from suite.config import ConfigSection, Profile
from suite.context import StageContext
from suite.facts import Facts, TopologyFacts, gpu
from suite.hardware.ring_peak import pcie_GBps
from suite.results import Expectation, Row, Verdict
from suite.stage_contract import Stage
from suite.verdicts import verdicts_for

NAME = "pinned"

V = verdicts_for(NAME)

PINNED_FLOOR = 0.70
"""Pinned copies below this share of the link's per-direction rate warn (PCIe protocol overhead ~10–15 %)."""
OVERLAP_FLOOR = 0.80


@dataclass(frozen=True, kw_only=True)
class PinnedConfig:
    copy_bytes: int = 256 * 2**20
    """Bytes per copy (large: the rate, not the latency)."""
    iters: int = 10
    """Timed copies per direction and kind of host memory."""
    gemm_n: int = 4096
    """bf16 n×n GEMMs, chained to last as long as one copy."""


CONFIG = ConfigSection("pinned", PinnedConfig, {})


def estimate(p) -> tuple[float, str]:
    c = p.profile.section(CONFIG)
    seconds = 4 * c.iters * c.copy_bytes / 10e9 + 10.0
    return seconds, f"4 × {c.iters} copies of {c.copy_bytes / 2**20:.0f} MiB at ≥ 10 GB/s, 3 overlap runs"


def link_GBps(facts: dict) -> tuple[float | None, str]:
    """The card's PCIe rate per direction and where it comes from."""
    gen, width = TopologyFacts.from_facts(facts).pcie.get("GPU0", (None, None))
    if not gen:  # one card: no topology matrix to spread the box-wide figure over, so read it as such
        box = (facts.get("topology") or {}).get("pcie") or {}
        gen, width = box.get("gen_max"), box.get("width_max")
    if gen:
        return pcie_GBps(gen, width), f"PCIe Gen{gen} x{width or 16} (nvidia-smi -q)"
    entry = gpu(facts)
    if entry is not None and entry.pcie_gen:
        return pcie_GBps(
            entry.pcie_gen, 16
        ), f"PCIe Gen{entry.pcie_gen} x16 ({entry.model} in suite/hardware/gpus.py)"
    return None, "no PCIe facts"


def expect(profile: Profile, facts: Facts) -> list[Expectation]:
    rate, basis = link_GBps(facts)
    if rate is None:
        return []
    return [
        Expectation(
            stage=NAME,
            case="bandwidth",
            metric="GBps",
            value=PINNED_FLOOR * rate,
            unit="GB/s",
            placement=d,
            source="model",
            size_bytes=profile.section(CONFIG).copy_bytes,
            basis=f"{PINNED_FLOOR:.0%} of {rate:g} GB/s per direction, {basis}",
        )
        for d in ("h2d", "d2h")
    ]


def run(profile: Profile, ctx: StageContext) -> list[Row]:
    import torch

    from suite.stages.pinned.worker import pinned_rows

    return pinned_rows(torch.device("cuda", 0), profile.section(CONFIG), say=ctx.say)


def _rate(rows, direction, memory):
    found = [
        r.value for r in rows if r.case == "bandwidth" and r.placement == direction and r.source == memory
    ]
    return found[0] if found else None


def judge(rows: list[Row], expectations: list[Expectation], facts: Facts) -> list[Verdict]:
    rate, basis = link_GBps(facts)
    out = []
    for direction in ("h2d", "d2h"):
        pinned, pageable = _rate(rows, direction, "pinned"), _rate(rows, direction, "pageable")
        if pinned is None or pageable is None:
            out.append(
                V.fail(
                    f"bandwidth.{direction}",
                    expected="pageable and pinned copies measured",
                    observed="missing",
                    reason="see raw/pinned/stage.log",
                )
            )
            continue
        if rate is None:
            out.append(
                V.skip(
                    f"bandwidth.{direction}",
                    expected=f"pinned ≥ {PINNED_FLOOR:.0%} of the PCIe link",
                    observed=f"pinned {pinned:.1f} GB/s",
                    reason=f"{basis}: run the topology stage first",
                )
            )
        else:
            out.append(
                V.check(
                    f"bandwidth.{direction}",
                    pinned >= PINNED_FLOOR * rate,
                    bad="warn",
                    expected=f"pinned ≥ {PINNED_FLOOR * rate:.1f} GB/s ({PINNED_FLOOR:.0%} of {rate:g}, "
                    f"{basis})",
                    observed=f"pinned {pinned:.1f} GB/s ({pinned / rate:.0%}), pageable {pageable:.1f} GB/s",
                    reason_ok="the link delivers what its generation and width allow",
                    reason_bad="below the link: a downtrained link (nvidia-smi -q: Link Gen/Width "
                    "current vs max), the card behind a switch shared with others, or the "
                    "host buffer on the far NUMA node",
                )
            )
        out.append(
            V.check(
                f"pinned_beats_pageable.{direction}",
                pinned > pageable,
                bad="warn",
                expected="pinned faster than pageable",
                observed=f"{pinned:.1f} vs {pageable:.1f} GB/s",
                reason_ok="pinning saves the staging copy",
                reason_bad="pageable as fast as pinned: "
                "the measurement is latency-bound (raise pinned.copy_bytes)",
            )
        )
    out += overlap_verdicts(rows)
    return out


def overlap_verdicts(rows: list[Row]) -> list[Verdict]:
    frac = {r.source: r.value for r in rows if r.case == "overlap" and r.metric == "overlap_fraction"}
    times = {(r.source, r.metric): r.value for r in rows if r.case == "overlap" and r.metric.startswith("t_")}
    if "pinned" not in frac:
        return [
            V.fail("overlap", expected="overlap runs", observed="missing", reason="see raw/pinned/stage.log")
        ]
    f = frac["pinned"]
    observed = (
        f"gemm {times.get(('pinned', 't_gemm'), math.nan) * 1e3:.2f} ms + copy "
        f"{times.get(('pinned', 't_copy'), math.nan) * 1e3:.2f} ms → together "
        f"{times.get(('pinned', 't_both'), math.nan) * 1e3:.2f} ms: overlap {f:.0%}; "
        f"pageable source {frac.get('pageable', math.nan):.0%}"
    )
    return [
        V.check(
            "overlap.pinned",
            math.isfinite(f) and f >= OVERLAP_FLOOR,
            bad="warn",
            expected=f"a pinned copy on a side stream hides under the GEMM: overlap ≥ {OVERLAP_FLOOR:.0%}",
            observed=observed,
            reason_ok="the copy engine runs beside the SMs",
            reason_bad="copy and GEMM serialised: the copy is not on its own stream, the source is not "
            "pinned, or CUDA_LAUNCH_BLOCKING is set",
        )
    ]


def headline(rows: list[Row], verdicts: list[Verdict], expectations: list[Expectation]) -> str | None:
    """Pinned host↔device GB/s both ways against the PCIe floor and pageable; how much of the side-stream copy
    hid under the GEMM."""
    from suite import headlines as hl

    rate = {(r.placement, r.source): r.value for r in hl.matching(rows, "bandwidth", "GBps")}
    if not any(k[1] == "pinned" for k in rate):
        return None
    pinned = " / ".join(
        f"{d} {hl.number(rate[(d, 'pinned')])}" for d in ("h2d", "d2h") if (d, "pinned") in rate
    )
    text = f"pinned {pinned} GB/s"
    pageable = [rate[(d, "pageable")] for d in ("h2d", "d2h") if (d, "pageable") in rate]
    if pageable:
        text += f" (pageable {hl.number(max(pageable))})"
    floor = hl.matching(expectations, "bandwidth", "GBps")
    if floor:
        text += f" · expected ≥ {hl.number(min(e.value for e in floor))}"
    overlap = hl.matching(rows, "overlap", "overlap_fraction", source="pinned")
    if overlap:
        text += f" · copy {overlap[0].value:.0%} hidden under the GEMM"
    return text


STAGE = Stage(
    row=34,
    after=("topology",),  # the PCIe generation and width of the card
    profiles=("gloo-cpu", "nccl-gpu", "nccl-1gpu"),
    title="pinned vs pageable host↔device GB/s both ways; side-stream copy overlapped with a GEMM (timeline)",
    measures="host↔device GB/s pageable vs pinned both ways; a side-stream copy overlapped with a GEMM",
    wrong="pinned copies far below the PCIe link; a pinned copy that does not overlap compute",
    rehearsal="",
    cpu_skip="host↔device copies and CUDA streams need a CUDA device: on gloo-cpu there is no PCIe link to "
    "measure (nccl-1gpu runs it on one card)",
    config=CONFIG,
    estimate=estimate,
    expect=expect,
    run=run,
    judge=judge,
    headline=headline,
)
