"""Per-GPU measurements of the health stage: bf16 GEMM throughput and pinned host↔device copy bandwidth.

    ctx.torchrun("suite.workloads.health_run", ["--gemm-n", "8192", ...], tag="measure")

Every rank measures its own device; on GPUs the GEMMs run on all ranks at once (the load under which rank 0
captures `nvidia-smi -q` for the clock and link checks) and the copies one rank at a time (they share the
host's PCIe root and memory, and a healthy GPU must not look slow because its neighbour copies). On CPU ranks
(the rehearsal) both run one rank at a time in float32: the numbers mean nothing, the outlier rule is real.
`--slow-rank R` makes rank R do `--slow-factor` times the work for the same count: an injected outlier.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import time
from pathlib import Path

import torch
import torch.distributed as dist

from suite.results import Row
from suite.workloads.worker import worker_session

STAGE = "health"


TRIALS = {"cuda": 5, "cpu": 9}
"""Each figure comes from several timed windows. On a GPU the median of 5: one slow window does not make a GPU
an outlier, a GPU held down for the whole measurement still is. On CPU ranks the fastest of 9 short ones, each
timed by the process's CPU time: the rehearsal's cores are shared with whatever else runs, and a busy machine
must not make a rank look slow (or hide an injected one: its work is 4× in CPU seconds, however the cores are
shared)."""


def _timed(fn, device: torch.device, iters: int) -> float:
    """Seconds for `iters` calls of fn, by CUDA events on a GPU, CPU seconds on CPU (see TRIALS)."""
    fn()  # warm-up (cuBLAS heuristics, page-locking)
    windows = [_window(fn, device, iters) for _ in range(TRIALS.get(device.type, 5))]
    return statistics.median(windows) if device.type == "cuda" else min(windows)


def _window(fn, device: torch.device, iters: int) -> float:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3
    t0 = time.process_time()
    for _ in range(iters):
        fn()
    return time.process_time() - t0


def gemm_tflops(device: torch.device, n: int, iters: int, factor: int) -> float:
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    seconds = _timed(lambda: torch.mm(a, b), device, iters * factor)
    return 2 * n**3 * iters / seconds / 1e12


def copy_GBps(device: torch.device, nbytes: int, iters: int, factor: int) -> tuple[float, float]:
    """(host→device, device→host) GB/s with a pinned host buffer (a plain one on CPU ranks)."""
    pinned = device.type == "cuda"
    host = torch.empty(nbytes, dtype=torch.uint8, pin_memory=pinned)
    dev = torch.empty(nbytes, dtype=torch.uint8, device=device)
    h2d = _timed(lambda: dev.copy_(host, non_blocking=True), device, iters * factor)
    d2h = _timed(lambda: host.copy_(dev, non_blocking=True), device, iters * factor)
    return nbytes * iters / h2d / 1e9, nbytes * iters / d2h / 1e9


def smi_under_load(device: torch.device, n: int, path: str, limit_s: float = 20.0) -> None:
    """Rank 0 on GPUs: keep every GPU busy with GEMMs while `nvidia-smi -q` reads clocks and links."""
    try:
        with open(path, "wb") as out:
            proc = subprocess.Popen(["nvidia-smi", "-q"], stdout=out, stderr=subprocess.DEVNULL)
    # no nvidia-smi here: the stage judges the idle capture alone (no file = no under-load view)
    except OSError:
        Path(path).unlink(missing_ok=True)
        return
    a = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    t0 = time.monotonic()
    while proc.poll() is None and time.monotonic() - t0 < limit_s:
        torch.mm(a, a)
        torch.cuda.synchronize(device)
    if proc.poll() is None:
        proc.kill()
    proc.wait()


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--gemm-n", type=int, required=True)
    p.add_argument("--gemm-iters", type=int, required=True)
    p.add_argument("--copy-bytes", type=int, required=True)
    p.add_argument("--copy-iters", type=int, required=True)
    p.add_argument("--slow-rank", type=int, default=-1)
    p.add_argument("--slow-factor", type=int, default=4)
    p.add_argument(
        "--smi-under-load", default="", help="file for `nvidia-smi -q` taken under GEMM load (GPUs)"
    )
    args = p.parse_args()
    with worker_session() as w:
        factor = args.slow_factor if w.rank == args.slow_rank else 1
        on_gpu = w.device.type == "cuda"
        name = torch.cuda.get_device_name(w.device) if on_gpu else "cpu"
        rows = []

        def one_at_a_time(fn):
            result = None
            for turn in range(w.world):
                dist.barrier()
                if turn == w.rank:
                    result = fn()
            dist.barrier()
            return result

        w.progress("GEMM per GPU" if on_gpu else "GEMM per rank")
        gemm = lambda: gemm_tflops(w.device, args.gemm_n, args.gemm_iters, factor)
        tflops = gemm() if on_gpu else one_at_a_time(gemm)
        rows.append(
            Row(
                stage=STAGE,
                case="gemm",
                metric="gemm_tflops",
                value=tflops,
                unit="TFLOP/s",
                dtype="bfloat16" if on_gpu else "float32",
                count=args.gemm_n,
                rank=w.rank,
                world=w.world,
                source="torch",
                text=name,
            )
        )
        if on_gpu and args.smi_under_load:
            w.progress("nvidia-smi -q under load")
            if w.rank == 0:
                smi_under_load(w.device, args.gemm_n, args.smi_under_load)
                dist.barrier()
            else:  # the other GPUs stay loaded until rank 0's capture is done
                done = dist.barrier(async_op=True)
                a = torch.randn(args.gemm_n, args.gemm_n, device=w.device, dtype=torch.bfloat16)
                while not done.is_completed():
                    torch.mm(a, a)
                    torch.cuda.synchronize(w.device)
                done.wait()
        w.progress("pinned host↔device copies per GPU")
        h2d, d2h = one_at_a_time(lambda: copy_GBps(w.device, args.copy_bytes, args.copy_iters, factor))
        for metric, value in (("h2d_GBps", h2d), ("d2h_GBps", d2h)):
            rows.append(
                Row(
                    stage=STAGE,
                    case="copy",
                    metric=metric,
                    value=value,
                    unit="GB/s",
                    size_bytes=args.copy_bytes,
                    rank=w.rank,
                    world=w.world,
                    source="torch",
                    text=name,
                )
            )
        w.emit(rows)


if __name__ == "__main__":
    main()
