"""Power, clocks, temperature and throttle reasons per GPU while a load stage runs, and the verdicts they
give.

    with sampling(ctx.raw_dir, "burnin", period_ms=1000) as samples:
        rows = ctx.torchrun(...).rows()
    rows += samples.rows()                        # case "sampler": power_W, sm_MHz, mem_MHz, temp_C, reasons;
                                                  # `t` in s
    throttle_verdicts(rows, stage="burnin", on_gpu=True)

The sampler is NVML in-process where nvidia-ml-py is importable (suite/hardware/gpu_sampler_nvml.py), else
`nvidia-smi --query-gpu=… --format=csv -lms N` running beside the workers: the tool every box with a driver
has, read by suite/parsers/smi_sampling.py; its CSV stays untouched under raw/<stage>/. (nvidia-smi needs no
package in the image and its output is what a renter can capture and `suite ingest` by hand; the image does
not install nvidia-ml-py, so there nvidia-smi samples.) A driver whose nvidia-smi refuses a field name
(`clocks_event_ reasons.*` replaced `clocks_throttle_reasons.*` in R535; both still work there) gets the other
spelling.

Rules: hardware slowdown, HW thermal, SW thermal and HW power-brake throttling in any sample fail, naming the
GPU, the reason, the share of samples and when it began; the software power cap (the board at its power limit,
normal under a full GEMM load) is reported, not failed; the SM clock's first and last tenth are compared in
the observed text, so a GPU whose clocks fall over the run says so.
"""

from __future__ import annotations

import contextlib
import shutil
import statistics
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from suite.hardware import gpu_sampler_nvml
from suite.parsers import ParseError
from suite.parsers.smi_sampling import REASON_BITS, named_reasons, parse_query_csv
from suite.results import Row, Verdict
from suite.verdicts import verdicts_for

FIELDS = (
    "timestamp",
    "index",
    "pci.bus_id",
    "power.draw",
    "power.limit",
    "clocks.sm",
    "clocks.mem",
    "temperature.gpu",
    "clocks_throttle_reasons.active",
)
EVENT_FIELDS = tuple(f.replace("clocks_throttle_reasons", "clocks_event_reasons") for f in FIELDS)
METRICS = (
    ("power.draw", "power_W", "W"),
    ("power.limit", "power_limit_W", "W"),
    ("clocks.sm", "sm_MHz", "MHz"),
    ("clocks.mem", "mem_MHz", "MHz"),
    ("temperature.gpu", "temp_C", "C"),
    ("reasons", "reasons", "mask"),
)
FAILING = ("HW Slowdown", "HW Thermal Slowdown", "SW Thermal Slowdown", "HW Power Brake Slowdown")
FAIL_MASK = sum(REASON_BITS[r] for r in FAILING)
REPORTED = "SW Power Cap"
CSV_NAME = "nvidia-smi-sampled.csv"
PERIOD_MS = 1000
"""The load stages' sampling period (bandwidth, baseline, dp; burnin has its own,
profile.section("burnin").sample_ms)."""


def period_for(profile, period_ms: int = PERIOD_MS) -> int:
    """The period a stage samples at on `profile`: none on the CPU rehearsal (no GPU to sample)."""
    return 0 if profile.is_rehearsal or profile.device != "cuda" else period_ms


@dataclass
class Sampling:
    """The sampler's outcome: its CSV (when it ran) and why not (when it did not)."""

    stage: str
    csv: Path | None = None
    why: str = ""
    nvml: Path | None = None
    """The NVML sampler's JSON lines, when nvidia-ml-py sampled (suite/hardware/gpu_sampler_nvml.py)."""
    _rows: list[Row] = field(default_factory=list)

    def rows(self) -> list[Row]:
        if not self._rows and self.nvml is not None and self.nvml.exists():
            self._rows = gpu_sampler_nvml.rows_from_jsonl(self.nvml.read_text(encoding="utf-8"), self.stage)
        if self._rows or self.csv is None or not self.csv.exists():
            return self._rows
        try:
            self._rows = rows_from_query_csv(
                self.csv.read_text(encoding="utf-8", errors="replace"), self.stage
            )
        except ParseError as e:
            self._rows = [
                Row(
                    stage=self.stage,
                    case="sampler",
                    metric="unreadable",
                    value=float("nan"),
                    unit="",
                    text=f"{self.csv.name}: {e}",
                )
            ]
        return self._rows


def _start(argv: list[str], out: Path) -> subprocess.Popen | None:
    with open(out, "wb") as sink:
        proc = subprocess.Popen(argv, stdout=sink, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    try:  # a refused field exits at once with a message; a running loop is still running after half a second
        proc.wait(timeout=0.5)
    except subprocess.TimeoutExpired:
        return proc
    return None if proc.returncode != 0 else proc


@contextlib.contextmanager
def sampling(raw_dir: Path, stage: str, *, period_ms: int) -> Iterator[Sampling]:
    """Sample every GPU each `period_ms` for the block (nothing when period_ms ≤ 0 or nvidia-smi is
    absent)."""
    found = Sampling(stage=stage)
    if period_ms <= 0:
        found.why = "sampler off (period 0: the CPU rehearsal has no GPU to sample)"
        yield found
        return
    in_process = gpu_sampler_nvml.NvmlSampler.start(
        Path(raw_dir) / gpu_sampler_nvml.JSONL_NAME, period_ms=period_ms
    )
    if in_process is not None:  # nvidia-ml-py importable and NVML up: the same counters without a process
        found.nvml = in_process.out
        try:
            yield found
        finally:
            in_process.stop()
        return
    if shutil.which("nvidia-smi") is None:
        found.why = "nvidia-smi not on PATH: power and clocks not sampled"
        yield found
        return
    out = Path(raw_dir) / CSV_NAME
    proc = None
    for fields in (FIELDS, EVENT_FIELDS):
        proc = _start(
            ["nvidia-smi", f"--query-gpu={','.join(fields)}", "--format=csv", "-lms", str(period_ms)], out
        )
        if proc is not None:
            break
    if proc is None:
        found.why = f"nvidia-smi refused the query (see {out.name}); power and clocks not sampled"
        yield found
        return
    found.csv = out
    try:
        yield found
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def rows_from_query_csv(text: str, stage: str) -> list[Row]:
    """The sampler's CSV (live or captured) → rows per GPU and sample, `t` in seconds since the first
    sample."""
    rows = []
    for s in parse_query_csv(text):
        for column, metric, unit in METRICS:
            if s.get(column) is not None:
                rows.append(
                    Row(
                        stage=stage,
                        case="sampler",
                        metric=metric,
                        value=float(s[column]),
                        unit=unit,
                        rank=s["index"],
                        t=s["t"],
                        source="nvidia-smi",
                        text=s.get("pci.bus_id"),
                    )
                )
    return rows


def _series(rows: list[Row], metric: str) -> dict[int, list[tuple[float, float]]]:
    out: dict[int, list[tuple[float, float]]] = {}
    for r in rows:
        if r.case == "sampler" and r.metric == metric and r.rank is not None:
            out.setdefault(int(r.rank), []).append((r.t or 0.0, r.value))
    return {g: sorted(v) for g, v in out.items()}


def clock_trend(series: list[tuple[float, float]]) -> str:
    """'SM 1980 → 1755 MHz' (median of the first and last tenth of the samples), '' for fewer than 10."""
    if len(series) < 10:
        return ""
    tenth = max(1, len(series) // 10)
    first, last = (statistics.median(v for _, v in part) for part in (series[:tenth], series[-tenth:]))
    return f"SM {first:.0f} → {last:.0f} MHz"


def throttle_verdicts(rows: list[Row], *, stage: str, on_gpu: bool, ingested: bool = False) -> list[Verdict]:
    """One `<stage>.throttle` verdict over every GPU the sampler saw (a skip saying why when it saw none; on a
    run `suite ingest` built, where no sampler ran, one that leaves the box verdict as it was)."""
    v = verdicts_for(stage)
    expected = f"no {', '.join(FAILING)} in any sample ({REPORTED} reported)"
    reasons = _series(rows, "reasons")
    unreadable = [r.text for r in rows if r.case == "sampler" and r.metric == "unreadable"]
    if unreadable:
        return [
            v.fail(
                "throttle",
                expected=expected,
                observed=unreadable[0],
                reason="the sampler's output is unreadable: it is kept under raw/; rerun the stage",
            )
        ]
    if not reasons and ingested:
        return [v.live_only_skip("throttle", expected, "clock and throttle sampling")]
    if not reasons:
        return [
            v.skip(
                "throttle",
                expected=expected,
                observed="no sample",
                reason="no GPU sampled (the CPU rehearsal, or nvidia-smi absent)"
                if not on_gpu
                else "nvidia-smi did not sample during the stage: see raw/ for its output",
            )
        ]
    clocks = _series(rows, "sm_MHz")
    bus = {int(r.rank): r.text for r in rows if r.case == "sampler" and r.rank is not None and r.text}
    bad, notes = [], []
    for gpu, series in sorted(reasons.items()):
        hits = [(t, int(m)) for t, m in series if int(m) & FAIL_MASK]
        capped = sum(1 for _, m in series if int(m) & REASON_BITS[REPORTED])
        trend = clock_trend(clocks.get(gpu, []))
        name = f"GPU {gpu}" + (f" ({bus[gpu]})" if gpu in bus else "")
        if hits:
            which = sorted({r for _, m in hits for r in named_reasons(m & FAIL_MASK)})
            bad.append(
                f"{name}: {', '.join(which)} in {len(hits)} of {len(series)} samples from t = {hits[0][0]:g} "
                f"s" + (f", {trend}" if trend else "")
            )
        elif capped or trend:
            notes.append(
                f"{name}: "
                + ", ".join(
                    x for x in (f"{REPORTED} {capped}/{len(series)} samples" if capped else "", trend) if x
                )
            )
    observed = (
        "; ".join(bad)
        if bad
        else (f"{len(reasons)} GPUs, no brake" + (f"; {'; '.join(notes)}" if notes else ""))
    )
    return [
        v.check(
            "throttle",
            not bad,
            expected=expected,
            observed=observed,
            reason_ok="no GPU was braked by hardware, temperature or its power brake while it worked",
            reason_bad="a GPU was braked while it worked: its figures are not its own; check cooling and the "
            "PSU/power feed with the provider, reset the GPU (`nvidia-smi -r -i <gpu>`), rerun "
            "`--recheck`; if it repeats, ask for another node",
        )
    ]
