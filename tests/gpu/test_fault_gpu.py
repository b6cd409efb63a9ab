"""The fault drill on NCCL (skipped without two CUDA devices: NCCL refuses two ranks on one card).

    .venv/bin/python -m pytest -q -m gpu tests/gpu/test_fault_gpu.py

A small model and a 20 s process-group timeout: a crash and a hang, each detected (by a Python
exception or by the watchdog's line in the survivor's log), restarted, resumed from the last DCP
checkpoint and judged by the stage; the NCCL watchdog settings in force are recorded; nothing lingers.
"""

from __future__ import annotations

import os
import time

import pytest

torch = pytest.importorskip("torch")

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(
        not torch.cuda.is_available() or torch.cuda.device_count() < 2, reason="needs 2 CUDA devices"
    ),
]


def profile():
    from suite.config import NCCL_GPU, GptConfig
    from suite.stages.fault import FaultConfig

    return NCCL_GPU.with_overrides(
        nproc=2,
        degrees=(1, 2),
        model=GptConfig(vocab=512, hidden=128, layers=2, heads=4, seq_len=64, batch=8, dtype="float32"),
        fault=FaultConfig(
            ranks=2,
            pg_timeout_s=20.0,
            steps=8,
            checkpoint_every=2,
            fault_step=5,
            scenarios=("crash", "hang"),
            loss_tolerance=1e-4,
            drill_timeout_s=240.0,
        ),
    )


def test_the_drill_on_nccl_detects_restarts_resumes_and_leaves_nothing(tmp_path):
    from suite.launch import procs
    from suite.stages import fault
    from tests.gpu.card_facts import live_facts, stage_context

    p = profile()
    facts = live_facts(p, tmp_path)  # the drills' model sized to this card, as in a run
    before = set(procs.descendants(os.getpid()))
    ctx = stage_context(
        p, "fault", tmp_path, facts, stream=open(os.devnull, "w"), deadline=time.monotonic() + 900
    )
    rows = fault.run(p, ctx)
    facts = {**facts, **ctx.published}
    verdicts = {v.id: v for v in fault.judge(rows, fault.expect(p, facts), facts)}
    for scenario in ("crash", "hang", "crash.async1", "hang.async1"):  # torch's default (3), then 1
        assert verdicts[f"fault.detect.{scenario}"].status != "fail", verdicts[f"fault.detect.{scenario}"]
        assert verdicts[f"fault.resume.{scenario}"].status == "pass", verdicts[f"fault.resume.{scenario}"]
        assert verdicts[f"fault.loss.{scenario}"].status == "pass", verdicts[f"fault.loss.{scenario}"]
    settings = {r.metric: r.text for r in rows if r.case == "crash" and r.unit == "text"}
    assert settings["TORCH_NCCL_ASYNC_ERROR_HANDLING"] == "unset"  # what the workers saw: torch's default
    settings = {r.metric: r.text for r in rows if r.case == "crash.async1" and r.unit == "text"}
    assert settings["TORCH_NCCL_ASYNC_ERROR_HANDLING"] == "1"
    hang = {r.metric: r.value for r in rows if r.case == "hang" and r.unit != "text"}
    # the watchdog fires at the 20 s timeout, counted from the survivor's all-reduce
    assert hang["detect_s"] > 10.0
    left = [pid for pid in procs.descendants(os.getpid()) if pid not in before and procs.alive(pid)]
    assert [pid for pid in left if command_name(pid) not in ("ps", None)] == []


def command_name(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return None  # gone meanwhile
