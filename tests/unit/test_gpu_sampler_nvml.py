"""The NVML sampler path: without nvidia-ml-py it does not start and the sampler falls back to nvidia-smi (or
says why none ran); its JSON lines read into the same rows, metrics and units the nvidia-smi CSV gives, so the
throttle rules judge either. No GPU here: the NVML thread itself runs on a GPU box only."""

from __future__ import annotations

import importlib.util
import json

import pytest

from suite.hardware import gpu_sampler
from suite.hardware import gpu_sampler_nvml as nvml
from suite.parsers.smi_sampling import REASON_BITS


@pytest.mark.skipif(importlib.util.find_spec("pynvml") is not None, reason="nvidia-ml-py is installed here")
def test_without_the_binding_nothing_starts_and_the_sampler_says_why(tmp_path):
    assert nvml.NvmlSampler.start(tmp_path / nvml.JSONL_NAME, period_ms=100) is None
    with gpu_sampler.sampling(tmp_path, "burnin", period_ms=100) as found:
        pass
    assert found.nvml is None and not (tmp_path / nvml.JSONL_NAME).exists()
    assert found.csv is not None or "nvidia-smi" in found.why


def test_lines_read_into_the_nvidia_smi_rows_and_a_thermal_brake_fails(tmp_path):
    mask = REASON_BITS["HW Thermal Slowdown"]
    lines = [
        {
            "t": t,
            "index": i,
            "bus_id": f"00000000:{18 + i:02X}:00.0",
            "power_W": 690.5,
            "power_limit_W": 700.0,
            "sm_MHz": 1980.0 - 100 * t * i,
            "mem_MHz": 2619.0,
            "temp_C": 60.0 + t,
            "reasons": float(mask if i == 1 and t >= 2 else 0),
        }
        for t in range(4)
        for i in range(2)
    ]
    text = "\n".join(json.dumps(x) for x in lines) + '\n{"t": 4, "ind'  # the last line cut by a kill
    rows = nvml.rows_from_jsonl(text, "burnin")
    assert len(rows) == len(lines) * len(nvml.FIELDS)
    metrics = {m for _, m, _ in gpu_sampler.METRICS}
    assert {r.metric for r in rows} == metrics and {r.source for r in rows} == {"nvml"}
    assert {(r.metric, r.unit) for r in rows} == {(m, u) for _, m, u in gpu_sampler.METRICS}
    verdicts = {v.id: v for v in gpu_sampler.throttle_verdicts(rows, stage="burnin", on_gpu=True)}
    failed = [v for v in verdicts.values() if v.status == "fail"]
    assert failed and all("GPU 1" in v.observed for v in failed)
    assert "HW Thermal Slowdown" in " ".join(v.observed for v in failed)
