"""The largest batch that fits, found by a search that recovers from OutOfMemoryError and proves it leaked
nothing.

    meter = CudaMeter(device, budget_bytes)          # the caching allocator, capped per process
    meter = CpuCap(cap_bytes)                         # on CPU: a dispatch mode that raises OOM past a cap
    result = largest_batch(lambda b: step(b), meter, max_batch=1024)

A try runs one training step at batch b under the meter. An OutOfMemoryError ends the try: the exception
(and with it the traceback holding the step's frames and their tensors) is gone once the `except` block is
left; then gc and empty_cache. Live memory must be back at the baseline taken before the try, to the byte:
a tensor kept by the failed step (a list it appended to, a saved exception) is reported as leaked bytes.
A try that fits and left live memory at the baseline needs no gc. The search doubles b until a try fails,
then bisects between the last fit and the first failure.
"""

from __future__ import annotations

import gc
import weakref
from dataclasses import dataclass, field
from typing import Callable

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten


class CpuCap(TorchDispatchMode):
    """Counts the bytes of every storage an op creates while active (freed ones subtracted through weak
    references) and raises torch.OutOfMemoryError when the live total would pass `cap_bytes` — the CPU
    stand-in for a card's memory. Only tensors made inside the mode count: enter it before building the
    model."""

    def __init__(self, cap_bytes: int | None = None):
        super().__init__()
        self.cap_bytes = cap_bytes
        self.live = 0
        self.peak_bytes = 0
        self._tracked: dict[int, weakref.ref] = {}

    def _forget(self, key: int, nbytes: int) -> None:
        self._tracked.pop(key, None)
        self.live -= nbytes

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        new = 0
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor) and t.device.type == "cpu":
                storage = t.untyped_storage()
                key = id(storage)
                if key not in self._tracked or self._tracked[key]() is not storage:
                    nbytes = storage.nbytes()
                    self._tracked[key] = weakref.ref(storage, lambda _, k=key, n=nbytes: self._forget(k, n))
                    self.live += nbytes
                    new += nbytes
        if self.cap_bytes is not None and self.live > self.cap_bytes and new:
            live = self.live
            del out, t, storage  # the traceback must not keep the tensor that did not fit
            raise torch.OutOfMemoryError(f"CPU cap: {live} bytes live > cap {self.cap_bytes}")
        self.peak_bytes = max(self.peak_bytes, self.live)
        return out

    # The meter interface the search uses.
    def allocated(self) -> int:
        return self.live

    def reset_peak(self) -> None:
        self.peak_bytes = self.live

    def peak(self) -> int:
        return self.peak_bytes

    def release(self) -> None:
        gc.collect()

    def after_oom(self) -> None:
        """Nothing to hand back: CPU memory has no cache."""


class CudaMeter:
    """The caching allocator's own numbers; `budget_bytes` caps this process
    (set_per_process_memory_fraction)."""

    def __init__(self, device: torch.device, budget_bytes: int | None = None):
        self.device = device
        total = torch.cuda.get_device_properties(device).total_memory
        self.cap_bytes = min(budget_bytes, total) if budget_bytes else total
        torch.cuda.set_per_process_memory_fraction(self.cap_bytes / total, device)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        return None

    def allocated(self) -> int:
        return torch.cuda.memory_allocated(self.device)

    def reset_peak(self) -> None:
        torch.cuda.reset_peak_memory_stats(self.device)

    def peak(self) -> int:
        return torch.cuda.max_memory_allocated(self.device)

    def release(self) -> None:
        gc.collect()
        self.after_oom()

    def after_oom(self) -> None:
        """The cached blocks of the failed try back to the driver: the next try starts from an unfragmented
        pool."""
        torch.cuda.synchronize(self.device)
        torch.cuda.empty_cache()


@dataclass
class Try:
    batch: int
    fits: bool
    peak_bytes: int
    """Peak live bytes of the try, above the baseline (of the step that fitted, or up to the failure)."""
    leaked_bytes: int
    """Live bytes after recovery minus the baseline before the try: 0 when nothing was kept."""


@dataclass
class SearchResult:
    largest_fit: int
    smallest_oom: int | None
    tries: list[Try] = field(default_factory=list)

    @property
    def leaked_bytes(self) -> int:
        return max((t.leaked_bytes for t in self.tries), default=0)


def try_batch(step: Callable[[int], None], meter, batch: int) -> Try:
    """One step at `batch`; an OutOfMemoryError is a 'does not fit', any other error propagates."""
    baseline = meter.allocated()
    meter.reset_peak()
    fits = True
    try:
        step(batch)
    except torch.OutOfMemoryError:
        fits = False
    peak = meter.peak() - baseline
    if meter.allocated() != baseline:
        # gc (~0.5 s with torch loaded) only when the try left something behind: a cycle, or a leak
        meter.release()
    elif not fits:
        meter.after_oom()
    return Try(batch=batch, fits=fits, peak_bytes=peak, leaked_bytes=meter.allocated() - baseline)


def largest_batch(step: Callable[[int], None], meter, max_batch: int) -> SearchResult:
    """Double until a try fails (or max_batch fits), then bisect: the largest batch that fits and the first
    that does not."""
    result = SearchResult(largest_fit=0, smallest_oom=None)

    def fits(b: int) -> bool:
        t = try_batch(step, meter, b)
        result.tries.append(t)
        return t.fits

    b = 1
    while b <= max_batch and fits(b):
        result.largest_fit, b = b, b * 2
    if b > max_batch:
        if result.largest_fit < max_batch and fits(max_batch):
            result.largest_fit = max_batch
        return result
    lo, hi = result.largest_fit, b
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid
    result.largest_fit, result.smallest_oom = lo, hi
    return result


def predicted_largest(peaks: dict[int, int], headroom_bytes: int) -> int | None:
    """From the peaks (above the baseline) of two fitting batches, linear in b: the largest b whose peak
    fits."""
    fitted = sorted(peaks.items())[:2]
    if len(fitted) < 2 or fitted[1][0] == fitted[0][0]:
        return None
    (b0, p0), (b1, p1) = fitted
    per_sample = (p1 - p0) / (b1 - b0)
    fixed = p0 - per_sample * b0
    return int((headroom_bytes - fixed) // per_sample) if per_sample > 0 else None
