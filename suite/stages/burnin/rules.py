"""The burn-in's rules: bits equal across GPUs and repeats, each GPU's sustained TFLOP/s against its peers and
its SKU.

    sdc_verdict(rows, "bfloat16")             # fail naming the GPU/rank, the repeat and the first differing
                                              # element
    peer_verdict(rows, "bfloat16", on_gpu=…)  # slowest > 10 % below the median warns, > 25 % fails
    peak_verdict(rows, gpu_entry)             # bf16 sustained ≥ SUSTAINED_PEAK_SHARE of the SKU's dense peak

Pure functions of the workers' rows (suite/stages/burnin/worker.py), so an ingested run is judged the same
way.
"""

from __future__ import annotations

import statistics

from suite.results import Row, Verdict
from suite.verdicts import CPU_SAYS_NOTHING, verdicts_for

V = verdicts_for("burnin")
PEER_WARN = 0.10
"""A GPU more than 10 % below its peers' median under the same sustained load is braked or weaker: a
warning."""
PEER_FAIL = 0.25
"""More than 25 % below: that GPU will hold every collective back for the whole rental (DCGM#122's third-speed
A100)."""
SUSTAINED_PEAK_SHARE = 0.50
"""A healthy H100/A100 holds 60–75 % of its dense bf16 datasheet peak on a large GEMM for minutes at its power
limit; below half it is braked (power, thermal, clocks) or not the SKU it claims."""
RESET = (
    "reset the GPU (`nvidia-smi -r -i <gpu>`) and rerun `--recheck`; if it repeats, ask the provider "
    "for "
    "another node"
)


def values(rows: list[Row], case: str, metric: str, dtype: str) -> dict[int, float]:
    return {
        int(r.rank): r.value
        for r in rows
        if r.case == case and r.metric == metric and r.dtype == dtype and r.rank is not None
    }


def devices(rows: list[Row]) -> dict[int, str]:
    return {
        int(r.rank): r.text or ""
        for r in rows
        if r.case == "device" and r.metric == "device" and r.rank is not None
    }


def who(rank: int, names: dict[int, str], on_gpu: bool) -> str:
    """'GPU 3 (rank 3, NVIDIA H100 80GB HBM3 (PCI bus 9a))' on a GPU (ranks run in PCI bus order), 'rank 3' on
    CPU."""
    return f"GPU {rank} (rank {rank}, {names.get(rank, '?')})" if on_gpu else f"rank {rank}"


def sdc_verdict(rows: list[Row], dtype: str, *, on_gpu: bool) -> Verdict:
    """Every GPU's result bit for bit equal to the majority's and to its own first good repeat, every
    repeat."""
    names = devices(rows)
    repeats = values(rows, "gemm", "repeats", dtype)
    ranks_bad = values(rows, "sdc_ranks", "mismatched_repeats", dtype)
    repeats_bad = values(rows, "sdc_repeats", "mismatched_repeats", dtype)
    firsts = sorted(
        (r for r in rows if r.metric == "first_difference" and r.dtype == dtype),
        key=lambda r: (r.repeat, r.rank, r.case),
    )
    models = sorted(set(names.values()))
    check = f"sdc.{dtype}"
    expected = (
        "every GPU's chain result bit for bit equal to the other GPUs' and to its own earlier repeats "
        "(seeded inputs, deterministic kernels)"
    )
    if not repeats:
        return V.fail(
            check,
            expected=expected,
            observed="no repeat reported",
            reason="the workers ran no repeat: see raw/burnin/burnin.rank*.log",
        )
    total = sum(repeats.values())
    if not firsts and not any(ranks_bad.values()) and not any(repeats_bad.values()):
        return V.passed(
            check,
            expected=expected,
            observed=f"{total} repeats on {len(repeats)} "
            f"{'GPUs' if on_gpu else 'ranks'}, every one bit-identical",
            reason="no silent data corruption seen: same inputs, same kernel, same bits",
        )
    mixed = len(models) > 1 and not any(repeats_bad.values())
    first = firsts[0] if firsts else None
    named = (
        f"{who(first.rank, names, on_gpu)} at repeat {first.repeat}: {first.text.split(': ', 1)[-1]}"
        if first
        else "digests differ (no element report kept)"
    )
    bad_ranks = sorted({r for r, n in {**ranks_bad, **repeats_bad}.items() if n})
    counts = "; ".join(
        f"{who(r, names, on_gpu)}: {int(ranks_bad.get(r, 0))} repeats unlike its peers, "
        f"{int(repeats_bad.get(r, 0))} unlike its own reference"
        for r in bad_ranks
    )
    observed = f"{named} ({counts}; {total} repeats in all)"
    if mixed:  # GPUs of different models legitimately differ in the last bits: only repeats are comparable
        return V.warn(
            check,
            expected=expected,
            observed=observed,
            reason=f"the ranks run different GPU models ({', '.join(models)}): their bits need not agree; "
            "each GPU's repeats agreed with its own",
        )
    return V.fail(
        check,
        expected=expected,
        observed=observed,
        reason=f"silent data corruption: {who(bad_ranks[0], names, on_gpu)} computed other bits from the "
        f"same "
        f"inputs with the same kernel; {RESET}",
    )


def peer_shortfall(per_rank: dict[int, float]) -> tuple[int, float, float] | None:
    """(slowest rank, its shortfall below the median of all ranks as a fraction, the median); None for < 2
    ranks."""
    if len(per_rank) < 2:
        return None
    median = statistics.median(per_rank.values())
    slowest = min(per_rank, key=per_rank.get)
    return slowest, (1.0 - per_rank[slowest] / median) if median > 0 else 0.0, median


def peer_verdict(rows: list[Row], dtype: str, *, on_gpu: bool) -> Verdict:
    per_rank = values(rows, "gemm", "tflops", dtype)
    names = devices(rows)
    check = f"peers.{dtype}"
    expected = (
        f"slowest GPU within {PEER_WARN:.0%} of the median sustained TFLOP/s (> {PEER_WARN:.0%} below "
        f"warns, > {PEER_FAIL:.0%} fails)"
    )
    listed = ", ".join(f"{r}: {v:.3g}" for r, v in sorted(per_rank.items()))
    found = peer_shortfall(per_rank)
    if found is None:
        world = max((r.world or 0 for r in rows if r.case == "gemm"), default=0)
        if world == 1 and len(per_rank) == 1:  # one GPU on the box: nothing to compare, nothing left open
            return V.not_applicable(
                check,
                expected=expected,
                observed=f"TFLOP/s {listed}",
                why="one GPU: no peer to compare it with (peak and SDC checks still hold it)",
            )
        return V.skip(
            check,
            expected=expected,
            observed=f"TFLOP/s {listed or 'none'}",
            reason="fewer than two ranks measured: no peers to compare with",
        )
    slowest, short, median = found
    observed = (
        f"{who(slowest, names, on_gpu)} {per_rank[slowest]:.3g} TFLOP/s, {short:.1%} below the median "
        f"{median:.3g} (per rank {listed})"
    )
    # the rule ran on the CPU ranks' figures; on shared cores a shortfall is the machine's load
    if not on_gpu:
        status = "fail" if short > PEER_FAIL else "warn" if short > PEER_WARN else "pass"
        return V.skip(
            check, expected=expected, observed=f"{observed}; the rule says {status}", reason=CPU_SAYS_NOTHING
        )
    if short > PEER_FAIL or short > PEER_WARN:
        return V.check(
            check,
            False,
            expected=expected,
            observed=observed,
            bad="fail" if short > PEER_FAIL else "warn",
            reason=f"{who(slowest, names, on_gpu)} sustains less than its twins under the same load "
            f"(power or thermal brake, lower clocks, a weaker part): read burnin's clock figure; "
            f"{RESET}",
        )
    return V.passed(
        check, expected=expected, observed=observed, reason="every GPU sustains what its peers do"
    )


def peak_verdict(rows: list[Row], model, *, on_gpu: bool) -> Verdict:
    """bf16 sustained per GPU against SUSTAINED_PEAK_SHARE of the SKU's dense bf16 peak
    (suite/hardware/gpus.py)."""
    per_rank = values(rows, "gemm", "tflops", "bfloat16")
    check = "peak.bfloat16"
    peak = getattr(model, "bf16_dense_tflops", None)
    expected = (
        f"every GPU ≥ {SUSTAINED_PEAK_SHARE:.0%} of the {peak:g} TFLOP/s bf16 dense peak ({model.model}: "
        f"{model.peak_source})"
        if peak
        else f"every GPU ≥ {SUSTAINED_PEAK_SHARE:.0%} of its SKU's bf16 dense peak (suite/hardware/gpus.py)"
    )
    listed = ", ".join(f"{r}: {v:.3g}" for r, v in sorted(per_rank.items())) or "none"
    if not on_gpu:
        return V.cpu_skip(check, expected=expected, observed=f"TFLOP/s per rank {listed}")
    if not peak:
        return V.skip(
            check,
            expected=expected,
            observed=f"TFLOP/s per GPU {listed}",
            reason="the GPU model has no bf16 datasheet figure in suite/hardware/gpus.py: peers only",
        )
    floor = SUSTAINED_PEAK_SHARE * peak
    names = devices(rows)
    low = [f"{who(r, names, True)} {v:.3g} < {floor:.3g}" for r, v in sorted(per_rank.items()) if v < floor]
    return V.check(
        check,
        not low,
        expected=expected,
        observed="; ".join(low) if low else f"TFLOP/s per GPU {listed}",
        reason_ok="every GPU sustains its SKU's expected share of peak",
        reason_bad="below half the datasheet's dense peak for the whole burn-in: clocks braked or not the "
        f"SKU the listing names; {RESET}",
    )


LINK_PEER_FRACTION = 0.70
"""A GPU's HBM or host link below 70 % of its peers' median is far below its twins (the real case: 3 of 8 GPUs
at 7–43 GB/s host↔device against ~101); a few percent between GPUs is normal and never flagged."""
LINKS = (
    ("hbm", "copy_GBps", "HBM copy (read + write)"),
    ("host_alone", "h2d_GBps", "host→device, one GPU at a time"),
    ("host_alone", "d2h_GBps", "device→host, one GPU at a time"),
    ("host_all", "h2d_GBps", "host→device, all at once"),
    ("host_all", "d2h_GBps", "device→host, all at once"),
)


def below_peers(per_rank: dict[int, float], fraction: float) -> dict[int, float]:
    """{rank: the median of the others} for every rank below `fraction` of that median."""
    out = {}
    for rank, value in per_rank.items():
        others = [v for r, v in per_rank.items() if r != rank]
        if others and value < fraction * statistics.median(others):
            out[rank] = statistics.median(others)
    return out


def link_verdicts(rows: list[Row], *, on_gpu: bool) -> list[Verdict]:
    """Per link measurement: every GPU within LINK_PEER_FRACTION of its peers (HBM also against its SKU:
    hbm_sku_verdict); nothing when the phase did not run."""
    names = devices(rows)
    out = []
    for case, metric, label in LINKS:
        per_rank = {
            int(r.rank): r.value for r in rows if r.case == case and r.metric == metric and r.rank is not None
        }
        if not per_rank:
            continue
        check = f"links.{case}.{metric.removesuffix('_GBps')}"
        expected = f"{label}: every GPU ≥ {LINK_PEER_FRACTION:.0%} of its peers' median"
        listed = ", ".join(f"{r}: {v:.3g}" for r, v in sorted(per_rank.items()))
        slow = below_peers(per_rank, LINK_PEER_FRACTION)
        bad = [
            f"{who(r, names, on_gpu)} {per_rank[r]:.3g} GB/s < {LINK_PEER_FRACTION:.0%} of {m:.3g}"
            for r, m in sorted(slow.items())
        ]
        if case == "host_all":
            alone = {int(r.rank): r.value for r in rows if r.case == "host_alone" and r.metric == metric}
            listed += "; all at once vs alone " + ", ".join(
                f"{r}: {v / alone[r]:.0%}" for r, v in sorted(per_rank.items()) if alone.get(r)
            )
        observed = "; ".join(bad) if bad else f"GB/s per {'GPU' if on_gpu else 'rank'} {listed}"
        if not on_gpu:
            out.append(
                V.skip(
                    check,
                    expected=expected,
                    observed=f"{observed}; the rule says {'fail' if bad else 'pass'}",
                    reason=CPU_SAYS_NOTHING,
                )
            )
            continue
        out.append(
            V.check(
                check,
                not bad,
                expected=expected,
                observed=observed,
                reason_ok="every GPU's link as fast as its twins'",
                reason_bad="this GPU's path is far slower than its twins' (a downtrained PCIe link, a bad "
                "riser or switch port, HBM at reduced clocks): compare `nvidia-smi -q` PCIe "
                f"generation/width in the health stage; {RESET}",
            )
        )
    return out


HBM_SHARE = 0.70
"""A device-to-device copy at sizes past L2 (read + write bytes per second, as CUDA's bandwidthTest counts
them) reaches 80–93 % of the datasheet's memory bandwidth on a healthy part: ~1.86 TB/s of 2.0 on an H100 PCIe
80 GB (contiguous memcpy, 8–24 GB payloads; https://hn.aimaker.dev/item/45236545), 2.8 TB/s of 3.35 (84 %) for
coalesced loads on an H100 SXM (https://mikamirai.com/blog/gpu-memory-bandwidth/). Below 70 % is memory at
reduced clocks, a part with HBM stacks disabled, or not the SKU the listing names; 70 % leaves ECC's few
percent and copy-engine differences between parts room."""


def hbm_sku_verdict(
    rows: list[Row], model, *, on_gpu: bool, datasheet: tuple[float, str] | None = None
) -> Verdict | None:
    """Each GPU's HBM copy against HBM_SHARE of its SKU's datasheet bandwidth (`datasheet`:
    suite/hardware/gpus.py memory_bandwidth, the model's own figure when not given); an unknown figure leaves
    the check open (never a pass); None when the copy phase did not run."""
    per_rank = {
        int(r.rank): r.value
        for r in rows
        if r.case == "hbm" and r.metric == "copy_GBps" and r.rank is not None
    }
    if not per_rank:
        return None
    check = "links.hbm.sku"
    sheet, source = datasheet or (getattr(model, "memory_GBps", None), getattr(model, "memory_source", ""))
    expected = (
        f"every GPU's HBM copy ≥ {HBM_SHARE:.0%} of the {sheet:g} GB/s datasheet bandwidth "
        f"({model.model}: {source})"
        if sheet
        else f"every GPU's HBM copy ≥ {HBM_SHARE:.0%} of its SKU's datasheet bandwidth "
        f"(suite/hardware/gpus.py)"
    )
    listed = ", ".join(f"{r}: {v:.4g}" for r, v in sorted(per_rank.items()))
    if not on_gpu:
        return V.cpu_skip(check, expected=expected, observed=f"GB/s per rank {listed}")
    if not sheet:
        named = getattr(model, "model", None) or "an unknown GPU model"
        return V.skip(
            check,
            expected=expected,
            observed=f"GB/s per GPU {listed}",
            reason=f"no memory bandwidth figure for {named} in suite/hardware/gpus.py: peers only, "
            "the SKU check undecided",
        )
    names = devices(rows)
    floor = HBM_SHARE * sheet
    low = [
        f"{who(r, names, True)} {v:.4g} GB/s ({v / sheet:.0%})"
        for r, v in sorted(per_rank.items())
        if v < floor
    ]
    return V.check(
        check,
        not low,
        expected=expected,
        observed="; ".join(low)
        if low
        else f"GB/s per GPU {listed} "
        f"({min(per_rank.values()) / sheet:.0%}–{max(per_rank.values()) / sheet:.0%} "
        "of the datasheet)",
        reason_ok="every GPU's memory streams at its SKU's expected share",
        reason_bad=f"memory far below the datasheet (reduced memory clocks, disabled stacks, another SKU): "
        f"read `nvidia-smi -q -d CLOCK` for the memory clock; {RESET}",
    )
