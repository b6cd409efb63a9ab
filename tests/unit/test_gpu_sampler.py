"""The sampler's parsers on real captures (tests/data/smi-sampling/, their sources in its README) and its
rule: hardware slowdown and power-brake throttling in a real H100 capture fail naming every GPU; idle captures
pass."""

from __future__ import annotations

from pathlib import Path

import pytest

from suite.hardware import gpu_sampler
from suite.parsers import ParseError
from suite.parsers.smi_sampling import REASON_BITS, named_reasons, parse_performance, parse_query_csv
from tests.unit.performance_rows import rows_from_performance

DATA = Path(__file__).resolve().parents[1] / "data"
SAMPLING = DATA / "smi-sampling"
THROTTLED = DATA / "health" / "nvsmi-q-11-h100x8-535-hw-power-brake-active.txt"


def read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def test_per_reason_columns_read_into_one_mask():
    samples = parse_query_csv(read(SAMPLING / "query-csv-01-a10-1ms-throttle-flags.csv"))
    assert len(samples) == 6 and {s["index"] for s in samples} == {0}
    first = samples[0]
    assert first["power.draw"] == 75.10 and first["clocks.gr"] == 1695.0 and first["clocks.mem"] == 6250.0
    assert first["temperature.gpu"] == 71.0 and first["reasons"] == REASON_BITS["GPU Idle"]
    # no timestamp column: the sample's number
    assert [s["t"] for s in samples] == [
        0.0,
        1.0,
        2.0,
        3.0,
        4.0,
        5.0,
    ]


def test_a_loop_without_reason_columns():
    samples = parse_query_csv(read(SAMPLING / "query-csv-02-rtx-loop-ksysguard-27.csv"))
    assert len(samples) == 13 and all(s["reasons"] is None for s in samples)
    assert [s["clocks.sm"] for s in samples[:3]] == [1320.0, 1470.0, 1470.0]
    assert min(s["power.draw"] for s in samples) == 76.64 and samples[0]["pstate"] == "P3"
    rows = gpu_sampler.rows_from_query_csv(
        read(SAMPLING / "query-csv-02-rtx-loop-ksysguard-27.csv"), "burnin"
    )
    assert {r.metric for r in rows} == {"power_W", "sm_MHz", "mem_MHz", "temp_C"}
    assert [r.t for r in rows if r.metric == "sm_MHz"] == [float(i) for i in range(13)]
    [v] = gpu_sampler.throttle_verdicts(rows, stage="burnin", on_gpu=True)
    assert v.status == "skip"  # clocks without reasons: nothing to judge throttling by


def test_performance_capture_idle_passes():
    [gpu] = parse_performance(read(SAMPLING / "perf-01-495-one-gpu-idle-mangohud-636.txt"))
    assert gpu["bus_id"] == "00000000:0E:00.0" and gpu["reasons"]["GPU Idle"] is True
    assert named_reasons(gpu["mask"]) == ["GPU Idle"]
    rows = rows_from_performance(read(SAMPLING / "perf-01-495-one-gpu-idle-mangohud-636.txt"), "burnin")
    [v] = gpu_sampler.throttle_verdicts(rows, stage="burnin", on_gpu=True)
    assert v.status == "pass" and v.id == "burnin.throttle"


def test_a_real_throttled_h100_fails_naming_each_gpu():
    gpus = parse_performance(read(THROTTLED))
    assert len(gpus) == 8 and all(
        g["reasons"]["HW Power Brake Slowdown"] and g["reasons"]["HW Slowdown"] for g in gpus
    )
    rows = rows_from_performance(read(THROTTLED), "dp")
    [v] = gpu_sampler.throttle_verdicts(rows, stage="dp", on_gpu=True)
    assert v.status == "fail" and v.id == "dp.throttle"
    for g in gpus:
        assert f"GPU {g['index']} ({g['bus_id']}): HW Power Brake Slowdown, HW Slowdown" in v.observed, (
            v.observed
        )


def test_software_power_cap_is_reported_not_failed():
    text = read(SAMPLING / "query-csv-01-a10-1ms-throttle-flags.csv").replace(
        "Not Active, Not Active, Not Active, Not Active, Active",
        "Not Active, Not Active, Active, Not Active, Active",
    )
    rows = gpu_sampler.rows_from_query_csv(text, "burnin")
    [v] = gpu_sampler.throttle_verdicts(rows, stage="burnin", on_gpu=True)
    assert v.status == "pass" and "SW Power Cap 6/6 samples" in v.observed


def test_clock_trend_names_falling_clocks():
    series = [(float(t), 1980.0 if t < 50 else 1600.0) for t in range(100)]
    assert gpu_sampler.clock_trend(series) == "SM 1980 → 1600 MHz"


@pytest.mark.parametrize("text", ["", "not a csv at all\n", "index, name\n0, H100\n"])
def test_what_is_not_the_query_is_refused(text):
    with pytest.raises(ParseError):
        parse_query_csv(text)
