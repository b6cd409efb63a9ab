"""How the scaling stages measure a training step: its time, the memory it peaks at, its communication.

    times = time_steps(step, n=10, device=device)              # seconds per step
    with PeakMemory(device) as mem: build(); warm_up()         # mem.peak_bytes
    comm_s, wall_s = communication_per_step(step, n=2, device=device)  # per step, one profiled region

Time: on a GPU, CUDA events around each step and one synchronize at the end (a CPU–GPU sync
point per measurement, not per step); on a CPU, perf_counter around each step.

Memory: on a GPU, torch.cuda.max_memory_allocated over the region minus what was allocated when
it began. On a CPU, torch's allocator keeps no statistics, so the region runs under the profiler
with profile_memory=True and the peak is read from its `[memory]` events: each carries `Total
Allocated`, the bytes allocated while profiling and still live. Both say: the most memory the
region held above what was live before it.

Communication: the region runs under torch.profiler; the time covered by communication (the
union of their intervals, so overlapping collectives count once) is divided by the steps. On a
GPU that is NCCL kernels (`ncclKernel_*`, `ncclDevKernel_*`) on the device timeline; on gloo
the `gloo:<collective>` annotations of gloo's worker thread.
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Iterable

import torch


def synchronize(device: torch.device) -> None:
    """Wait for queued device work (a CPU–GPU sync point; nothing to wait for on a CPU)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_steps(step: Callable[[], Any], n: int, device: torch.device) -> list[float]:
    """Seconds taken by each of n calls of `step`."""
    if n <= 0:
        return []
    if device.type == "cuda":
        synchronize(device)
        marks = [torch.cuda.Event(enable_timing=True) for _ in range(n + 1)]
        marks[0].record()
        for i in range(n):
            step()
            marks[i + 1].record()
        synchronize(device)
        return [marks[i].elapsed_time(marks[i + 1]) / 1e3 for i in range(n)]  # ms → s
    out = []
    for _ in range(n):
        start = time.perf_counter()
        step()
        out.append(time.perf_counter() - start)
    return out


def typical(times: list[float]) -> float:
    """The median step time, seconds (robust to one slow step); NaN for none."""
    return statistics.median(times) if times else float("nan")


# ---------------------------------------------------------------- memory


def peak_from_memory_events(events: Iterable[dict]) -> int:
    """Peak bytes held above the region's start, from a chrome trace's `[memory]` events of the CPU.

    `Total Allocated` after each event counts every block allocated while profiling and not yet
    freed; the level before the first event is its Total Allocated minus its Bytes.
    """
    mem = [e for e in events if e.get("name") == "[memory]" and e.get("args", {}).get("Device Type", 0) == 0]
    if not mem:
        return 0
    mem.sort(key=lambda e: (e.get("ts", 0), e["args"].get("Ev Idx", 0)))
    first = mem[0]["args"]
    start_level = first["Total Allocated"] - first["Bytes"]
    return max(0, max(e["args"]["Total Allocated"] for e in mem) - start_level)


class PeakMemory:
    """Context manager: `peak_bytes` is the most memory the block allocated above its starting level."""

    def __init__(self, device: torch.device, keep_trace: Path | None = None):
        self.device = device
        self.keep_trace = keep_trace
        self.peak_bytes = 0
        self._profiler = None
        self._start = 0

    def __enter__(self) -> "PeakMemory":
        if self.device.type == "cuda":
            synchronize(self.device)
            self._start = torch.cuda.memory_allocated(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
        else:
            from torch.profiler import ProfilerActivity, profile

            self._profiler = profile(activities=[ProfilerActivity.CPU], profile_memory=True)
            self._profiler.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        if self.device.type == "cuda":
            synchronize(self.device)
            self.peak_bytes = max(0, torch.cuda.max_memory_allocated(self.device) - self._start)
            return
        self._profiler.__exit__(*exc)
        if exc[0] is None:
            self.peak_bytes = peak_from_memory_events(trace_events(self._profiler, self.keep_trace))


def trace_events(prof, keep: Path | None = None) -> list[dict]:
    """The profiler's chrome-trace events (written to `keep` when given, else to a temporary file)."""
    if keep is not None:
        keep.parent.mkdir(parents=True, exist_ok=True)
        prof.export_chrome_trace(str(keep))
        return json.loads(keep.read_text())["traceEvents"]
    fd, path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    try:
        prof.export_chrome_trace(path)
        return json.loads(Path(path).read_text())["traceEvents"]
    finally:
        os.unlink(path)


# ---------------------------------------------------------------- communication


def is_communication(event: dict) -> bool:
    """A communication event of a chrome trace: an NCCL kernel on the GPU, or gloo's annotation of a
    collective."""
    name = str(event.get("name", ""))
    if event.get("cat") == "kernel":
        return "nccl" in name.lower()
    return name.startswith("gloo:")


def union_us(intervals: Iterable[tuple[float, float]]) -> float:
    """Total length of the union of [start, end) intervals (µs in, µs out)."""
    total, current_start, current_end = 0.0, None, None
    for start, end in sorted(intervals):
        if current_end is None or start > current_end:
            if current_end is not None:
                total += current_end - current_start
            current_start, current_end = start, end
        else:
            current_end = max(current_end, end)
    if current_end is not None:
        total += current_end - current_start
    return total


def communication_us(events: Iterable[dict]) -> float:
    """Microseconds during which some communication ran (overlapping collectives counted once)."""
    return union_us(
        (e["ts"], e["ts"] + e.get("dur", 0.0)) for e in events if e.get("ph") == "X" and is_communication(e)
    )


def communication_per_step(
    step: Callable[[], Any], n: int, device: torch.device, keep_trace: Path | None = None
) -> tuple[float, float]:
    """(seconds of communication, seconds of wall time) per step, both from the same n profiled steps.

    Their ratio is the communication share of a step; the profiler slows the step a little, so the
    share is taken within the profiled region rather than against the unprofiled step time.
    """
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    synchronize(device)
    with profile(activities=activities) as prof:
        start = time.perf_counter()
        for _ in range(n):
            step()
        synchronize(device)
        wall = time.perf_counter() - start
    n = max(n, 1)
    return communication_us(trace_events(prof, keep_trace)) / 1e6 / n, wall / n
