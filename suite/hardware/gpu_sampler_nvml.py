"""The sampler through NVML (`nvidia-ml-py`, NVIDIA's maintained binding, imported as `pynvml`) when it is
importable.

    thread = NvmlSampler.start(raw_dir / JSONL_NAME, period_ms=1000)   # None: no binding, or NVML would not
                                                                       # start
    ...                                                                # the load
    thread.stop(); rows = rows_from_jsonl(path.read_text(), "burnin")

The same counters nvidia-smi's `--query-gpu` loop reads (nvidia-smi is itself an NVML client), read
in-process: no process to start or parse, the exact throttle mask, milliwatts. One JSON line per GPU and
sample is kept under raw/<stage>/ as it is read. nvidia-ml-py is not among the suite's dependencies (the image
does not install it): where it is installed, suite/hardware/gpu_sampler.py uses this path, else `nvidia-smi
-lms`; both give the same rows.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

from suite.results import Row

JSONL_NAME = "nvml-sampled.jsonl"
FIELDS = (
    ("power_W", "W"),
    ("power_limit_W", "W"),
    ("sm_MHz", "MHz"),
    ("mem_MHz", "MHz"),
    ("temp_C", "C"),
    ("reasons", "mask"),
)
"""The metrics of suite/hardware/gpu_sampler.py's METRICS, in its units."""


def _binding():
    """pynvml with NVML started, or None (not installed, no driver)."""
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    # pynvml raises NVMLError_* subclasses for a missing or mismatched driver
    except Exception:  # noqa: BLE001
        return None
    return pynvml


def _reading(nvml, handle) -> dict[str, float]:
    # the newer name (R535+) where the binding has it
    reasons = (
        getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
        or nvml.nvmlDeviceGetCurrentClocksThrottleReasons
    )
    return {
        "power_W": nvml.nvmlDeviceGetPowerUsage(handle) / 1000.0,
        "power_limit_W": nvml.nvmlDeviceGetEnforcedPowerLimit(handle) / 1000.0,
        "sm_MHz": float(nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM)),
        "mem_MHz": float(nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_MEM)),
        "temp_C": float(nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU)),
        "reasons": float(reasons(handle)),
    }


class NvmlSampler:
    """A thread reading every GPU each period into a JSON-lines file until stop()."""

    def __init__(self, nvml, out: Path, period_ms: int):
        self.nvml, self.out, self.period_s = nvml, out, period_ms / 1000.0
        self.handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(nvml.nvmlDeviceGetCount())]
        bus = [nvml.nvmlDeviceGetPciInfo(h).busId for h in self.handles]
        self.bus = [b.decode() if isinstance(b, bytes) else str(b) for b in bus]
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._loop, name="nvml-sampler", daemon=True)

    @classmethod
    def start(cls, out: Path, *, period_ms: int) -> "NvmlSampler | None":
        nvml = _binding()
        if nvml is None:
            return None
        try:
            sampler = cls(nvml, out, period_ms)
        except Exception:  # noqa: BLE001 — NVML started but cannot enumerate: let nvidia-smi try
            nvml.nvmlShutdown()
            return None
        sampler.thread.start()
        return sampler

    def _loop(self) -> None:
        start = time.monotonic()
        with open(self.out, "a", encoding="utf-8") as sink:
            while not self.done.is_set():
                t = time.monotonic() - start
                for index, handle in enumerate(self.handles):
                    try:
                        sample = _reading(self.nvml, handle)
                    except Exception as e:  # noqa: BLE001 — one GPU's failed read is kept, the others go on
                        sample = {"error": str(e)}
                    sink.write(
                        json.dumps({"t": round(t, 3), "index": index, "bus_id": self.bus[index], **sample})
                        + "\n"
                    )
                sink.flush()
                self.done.wait(self.period_s)

    def stop(self) -> None:
        self.done.set()
        self.thread.join(timeout=10)
        self.nvml.nvmlShutdown()


def rows_from_jsonl(text: str, stage: str) -> list[Row]:
    """The NVML sampler's file → the rows suite/hardware/gpu_sampler.py makes from nvidia-smi's CSV (source
    nvml)."""
    rows = []
    for line in text.splitlines():
        try:
            sample = json.loads(line)
        except ValueError:
            continue  # a line cut by a kill at the stage's timeout
        for metric, unit in FIELDS:
            if isinstance(sample.get(metric), (int, float)):
                rows.append(
                    Row(
                        stage=stage,
                        case="sampler",
                        metric=metric,
                        value=float(sample[metric]),
                        unit=unit,
                        rank=int(sample["index"]),
                        t=float(sample["t"]),
                        source="nvml",
                        text=sample.get("bus_id"),
                    )
                )
    return rows
