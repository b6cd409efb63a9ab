"""Host↔device copies on one card: pageable vs pinned bandwidth both ways, and a copy on a side stream
overlapped with a GEMM on the default stream, with a CUDA-event timeline. Run in the pinned stage's process.

    rows = pinned_rows(cfg, torch.device("cuda", 0))

Bandwidth: `iters` copies of `copy_bytes`, timed on the host between two synchronize() calls (a pageable copy
is staged through a driver buffer and returns only when done, so host time is the one clock both kinds share).
Overlap: a GEMM chain calibrated to last about as long as one pinned H2D copy; each alone, then both at once
(the copy on a side stream), every start and end a CUDA event against one origin event. overlap = (t_gemm +
t_copy − t_both) / min(t_gemm, t_copy): 1 when the shorter hides entirely, 0 when they serialise. The same
with a pageable source shows why pinning matters: cudaMemcpyAsync from pageable memory is synchronous.
"""

from __future__ import annotations

import math
import time

import torch

from suite.results import Row

STAGE = "pinned"


def _row(case, metric, value, unit, **kw) -> Row:
    return Row(stage=STAGE, case=case, metric=metric, value=float(value), unit=unit, **kw)


def host_buffer(nbytes: int, pinned: bool) -> torch.Tensor:
    return torch.empty(nbytes, dtype=torch.uint8, pin_memory=pinned).fill_(1)


def copy_GBps(device, nbytes: int, pinned: bool, direction: str, iters: int) -> float:
    host, dev = host_buffer(nbytes, pinned), torch.empty(nbytes, dtype=torch.uint8, device=device)
    dst, src = (dev, host) if direction == "h2d" else (host, dev)
    dst.copy_(src, non_blocking=pinned)  # warm: the driver's staging buffers, the first touch of the pages
    torch.cuda.synchronize(device)
    t = time.perf_counter()
    for _ in range(iters):
        dst.copy_(src, non_blocking=pinned)
    torch.cuda.synchronize(device)
    return nbytes * iters / (time.perf_counter() - t) / 1e9


def _event() -> torch.cuda.Event:
    return torch.cuda.Event(enable_timing=True)


def overlap_case(device, cfg, pinned: bool, count: int) -> dict[str, float]:
    """t_gemm, t_copy alone and t_both together (ms, CUDA events' unit), and the together run's timeline (ms
    after the origin event)."""
    a = torch.randn(cfg.gemm_n, cfg.gemm_n, device=device, dtype=torch.bfloat16)
    host, dev = (
        host_buffer(cfg.copy_bytes, pinned),
        torch.empty(cfg.copy_bytes, dtype=torch.uint8, device=device),
    )
    side = torch.cuda.Stream(device)
    main = torch.cuda.current_stream(device)

    def gemm():
        c = a
        for _ in range(count):
            c = a @ a
        return c

    def timed(run_gemm: bool, run_copy: bool) -> dict[str, float]:
        torch.cuda.synchronize(device)
        origin, g0, g1, c0, c1 = (_event() for _ in range(5))
        origin.record(main)
        side.wait_event(origin)
        if run_copy:
            with torch.cuda.stream(side):
                c0.record(side)
                dev.copy_(host, non_blocking=pinned)
                c1.record(side)
        if run_gemm:
            g0.record(main)
            gemm()
            g1.record(main)
        main.wait_stream(side)
        done = _event()
        done.record(main)
        torch.cuda.synchronize(device)
        out = {"total": origin.elapsed_time(done)}
        if run_gemm:
            out.update(gemm_start=origin.elapsed_time(g0), gemm_end=origin.elapsed_time(g1))
        if run_copy:
            out.update(copy_start=origin.elapsed_time(c0), copy_end=origin.elapsed_time(c1))
        return out

    timed(True, True)  # warm
    both = timed(True, True)
    return {
        "t_gemm": timed(True, False)["total"],
        "t_copy": timed(False, True)["total"],
        "t_both": both["total"],
        **{k: v for k, v in both.items() if k != "total"},
    }


def calibrate_gemms(device, cfg) -> int:
    """GEMMs whose chain lasts about one pinned H2D copy of copy_bytes (so the overlap can be complete)."""
    probe = overlap_case(device, cfg, True, 4)
    per_gemm = probe["t_gemm"] / 4
    return max(1, math.ceil(probe["t_copy"] / per_gemm)) if per_gemm > 0 else 4


def pinned_rows(device, cfg, say=lambda message: None) -> list[Row]:
    rows = []
    for pinned in (False, True):
        for direction in ("h2d", "d2h"):
            memory = "pinned" if pinned else "pageable"
            say(f"{direction} {memory}: {cfg.iters} × {cfg.copy_bytes / 2**20:.0f} MiB")
            rows.append(
                _row(
                    "bandwidth",
                    "GBps",
                    copy_GBps(device, cfg.copy_bytes, pinned, direction, cfg.iters),
                    "GB/s",
                    size_bytes=cfg.copy_bytes,
                    placement=direction,
                    source=memory,
                )
            )
    count = calibrate_gemms(device, cfg)
    for pinned in (True, False):
        memory = "pinned" if pinned else "pageable"
        say(f"copy on a side stream ({memory}) against {count} GEMMs")
        case = overlap_case(device, cfg, pinned, count)
        shorter = min(case["t_gemm"], case["t_copy"])
        overlap = (case["t_gemm"] + case["t_copy"] - case["t_both"]) / shorter if shorter > 0 else math.nan
        rows += [
            _row("overlap", metric, case[metric] / 1e3, "s", source=memory, count=count)
            for metric in ("t_gemm", "t_copy", "t_both")
        ]
        rows.append(_row("overlap", "overlap_fraction", overlap, "ratio", source=memory, count=count))
        for lane in ("gemm", "copy"):
            rows += [
                _row("timeline", f"{edge}_s", case[f"{lane}_{edge}"] / 1e3, "s", source=memory, algo=lane)
                for edge in ("start", "end")
            ]
    return rows
