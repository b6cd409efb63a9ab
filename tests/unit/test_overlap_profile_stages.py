"""The overlap and profile stages' pure parts: bucket layout and α-β prediction, the nsys commands,
judge() on either profile, the timeline window, and the figures."""

from __future__ import annotations

import math
import sys

import pandas as pd
import pytest
from matplotlib.figure import Figure

from suite.config import GLOO_CPU, NCCL_GPU
from suite.costmodel.alphabeta import ring_allreduce_s
from suite.costmodel.buckets import (
    MIB,
    caps_for,
    ddp_bucket_layout,
    no_overlap_prediction,
    overlap_prediction,
)
from suite.parsers import traces
from suite.results import Row
from suite.stages import overlap, profile
from suite.stages.overlap import figure as overlap_figures
from suite.stages.profile import figure as profile_figures
from suite.stages.profile import worker as profile_run
from suite.workloads.ddp_modes import OverlapMode
from tests.factories import by_id

GPU_FACTS = {"profile": NCCL_GPU.to_dict()}
CPU_FACTS = {"profile": GLOO_CPU.to_dict()}


# ---------------------------------------------------------------- buckets and the α-β prediction


def test_bucket_layout_closes_a_bucket_once_it_reaches_the_cap():
    # cap 10: 4+4 → 8, +4 → 12 ≥ 10 closes; 3 → 3, +9 → 12 closes; 1 left over.
    assert ddp_bucket_layout([4, 4, 4, 3, 9, 1], cap_bytes=10) == [12, 12, 1]
    # A 5-byte first bucket: 4+4 closes at 8, then the cap of 10.
    assert ddp_bucket_layout([4, 4, 4, 3, 9, 1], cap_bytes=10, first_cap_bytes=5) == [8, 16, 1]
    assert caps_for(None) == (25 * MIB, 1 * MIB)  # DDP's default: 25 MiB, first bucket 1 MiB
    assert caps_for(100.0) == (100 * MIB, 100 * MIB)


def test_overlap_prediction_hides_all_but_the_last_bucket():
    a, b, n = 5e-6, 200e9, 8
    layout = [4 * MIB, 4 * MIB, 1 * MIB]
    p = overlap_prediction(layout, n, a, b)
    each = [ring_allreduce_s(s, n, a, b) for s in layout]
    assert p.comm_s == pytest.approx(sum(each))
    assert p.exposed_s == pytest.approx(each[-1])
    assert p.hidden_s == pytest.approx(each[0] + each[1])
    # A backward shorter than the hideable communication leaves the rest exposed.
    short = overlap_prediction(layout, n, a, b, backward_s=each[0])
    assert short.hidden_s == pytest.approx(each[0])
    flat = no_overlap_prediction(sum(layout), n, a, b)
    assert flat.hidden_s == 0 and flat.comm_s == pytest.approx(ring_allreduce_s(9 * MIB, n, a, b))
    # Fragmenting costs latency: 2(n−1)α per extra bucket.
    assert p.comm_s - flat.comm_s == pytest.approx(2 * 2 * (n - 1) * a)


def test_modes_and_their_labels():
    assert overlap.small_cap_mb(165_120) == 0.01  # the rehearsal model: a sixteenth of its gradients
    assert overlap.small_cap_mb(1_073_881_088) == 1.0  # the nccl-gpu model's bf16 gradients
    labels = [OverlapMode.parse(m).label for m in overlap.modes(NCCL_GPU.model)]
    assert labels == ["no_overlap", "bucket_1MB", "bucket_25MB", "bucket_100MB"]
    assert overlap.gradient_sizes(GLOO_CPU.model)[0] == 256 * 32 * 4  # the head's gradient is ready first
    assert sum(overlap.gradient_sizes(NCCL_GPU.model)) == 536_940_544 * 2


def test_expectations_per_mode():
    exp = overlap.expect(NCCL_GPU, {})
    by = {(e.overlap, e.metric): e for e in exp}
    assert by[("no_overlap", "predicted_hidden_comm_s")].value == 0
    # Every weight matrix of the nccl-gpu model is ≥ 8 MiB in bf16, so with 1 MiB buckets each closes its
    # own bucket (the LayerNorms ride along): 8 layers × 6 matrices + embedding + head = 50 buckets.
    assert by[("bucket_1MB", "buckets")].value == 8 * 6 + 2
    # 1,073,881,088 B of gradients; 100 MiB buckets close past 100 MiB: at most ten of them.
    assert 2 <= by[("bucket_100MB", "buckets")].value <= 1_073_881_088 // (100 * MIB)
    assert by[("bucket_100MB", "buckets")].value < by[("bucket_25MB", "buckets")].value < 50
    assert by[("bucket_1MB", "predicted_comm_s")].value > by[("bucket_100MB", "predicted_comm_s")].value
    assert "α = 5 µs" in by[("bucket_25MB", "predicted_comm_s")].basis
    fitted = overlap.expect(
        NCCL_GPU, {"alpha_beta": {"alpha_s": 1e-5, "beta_Bps": 1e11, "source": "nccl-tests"}}
    )
    assert {e.basis for e in fitted if e.metric == "predicted_comm_s"} != {
        e.basis for e in exp if e.metric == "predicted_comm_s"
    }


# ---------------------------------------------------------------- overlap judge


def overlap_rows(
    steps: dict[str, float], diff: float = 1e-8, buckets: dict[str, str] | None = None
) -> list[Row]:
    rows = []
    for label, step in steps.items():
        rows += [
            Row(stage="overlap", case="ddp", metric="step_time_s", value=step, unit="s", overlap=label),
            Row(
                stage="overlap",
                case="ddp",
                metric="max_grad_diff",
                value=diff,
                unit="ratio",
                overlap=label,
                dtype="float32",
            ),
            Row(
                stage="overlap",
                case="ddp",
                metric="max_grad_diff_vs_no_overlap",
                value=diff,
                unit="ratio",
                overlap=label,
                dtype="float32",
            ),
        ]
    for label, text in (buckets or {}).items():
        rows.append(
            Row(
                stage="overlap",
                case="ddp",
                metric="buckets",
                value=len(text.split()),
                unit="count",
                overlap=label,
                text=text,
            )
        )
    rows.append(
        Row(stage="overlap", case="ddp", metric="compute_s", value=0.06, unit="s", overlap="no_overlap")
    )
    return rows


def test_overlap_judge_warns_on_gpu_when_overlap_is_slower_naming_the_bucket_size():
    exp = overlap.expect(NCCL_GPU, {})
    rows = overlap_rows(
        {"no_overlap": 0.100, "bucket_1MB": 0.120, "bucket_25MB": 0.080, "bucket_100MB": 0.085}
    )
    v = by_id(overlap.judge(rows, exp, GPU_FACTS))
    assert v["overlap.speed.bucket_1MB"].status == "warn"
    assert "buckets too small: communication fragmented" in v["overlap.speed.bucket_1MB"].reason
    assert "1MB" in v["overlap.speed.bucket_1MB"].reason
    assert v["overlap.speed.bucket_25MB"].status == "pass"
    assert all(v[f"overlap.grads.{m}"].status == "pass" for m in ("no_overlap", "bucket_1MB", "bucket_25MB"))


def test_overlap_judge_skips_speed_on_cpu_and_fails_unequal_gradients():
    exp = overlap.expect(GLOO_CPU, {})
    labels = [e.overlap for e in exp if e.metric == "buckets"]
    rows = overlap_rows({m: 0.1 for m in labels}, diff=3e-3)
    v = by_id(overlap.judge(rows, exp, CPU_FACTS))
    assert {v[f"overlap.speed.{m}"].status for m in labels if m != "no_overlap"} == {"skip"}
    assert {v[f"overlap.grads.{m}"].status for m in labels} == {"fail"}
    missing = by_id(overlap.judge([r for r in rows if r.overlap != "bucket_100MB"], exp, CPU_FACTS))
    assert missing["overlap.grads.bucket_100MB"].status == "fail"


def test_derived_rows_use_the_measured_layout_and_backward():
    rows = overlap_rows(
        {"no_overlap": 0.100, "bucket_0.01MB": 0.090}, buckets={"bucket_0.01MB": f"{MIB} {MIB} {MIB}"}
    )
    out = {r.metric: r for r in overlap.derived_rows(rows, 4, 30e-6, 2e9)}
    assert out["step_time_saving_s"].value == pytest.approx(0.010)
    one = ring_allreduce_s(MIB, 4, 30e-6, 2e9)
    backward = 0.06 * 2 / 3
    assert out["predicted_hidden_comm_s"].value == pytest.approx(min(2 * one, backward))


# ---------------------------------------------------------------- profile: commands


def test_nsys_wraps_each_rank_with_a_cuda_profiler_api_capture_range():
    cmd = profile_run.nsys_command(
        "/opt/nsys/bin/nsys",
        "/run/raw/profile/rank_3",
        "/usr/bin/python3",
        ["--model", "{}", "--capture", "cuda-profiler-api"],
    )
    assert cmd[:2] == ["/opt/nsys/bin/nsys", "profile"]
    assert "--capture-range=cudaProfilerApi" in cmd and "--capture-range-end=stop" in cmd
    assert "--output=/run/raw/profile/rank_3" in cmd
    # CPU sampling off: eight concurrent samplers would perturb the timeline being judged
    assert "--sample=none" in cmd and "--cpuctxsw=none" in cmd
    trace = next(a for a in cmd if a.startswith("--trace="))
    assert {"cuda", "nvtx"} <= set(trace.removeprefix("--trace=").split(","))
    tail = cmd[cmd.index("/usr/bin/python3") :]
    assert tail == [
        "/usr/bin/python3",
        "-m",
        "suite.stages.profile.worker",
        "--model",
        "{}",
        "--capture",
        "cuda-profiler-api",
    ]
    assert profile_run.strip_nsys(["--nsys", "/x/nsys", "--steps", "3", "--nsys=/y"]) == ["--steps", "3"]


def test_worker_execs_nsys_with_its_rank_in_the_report_name(monkeypatch):
    calls = []
    monkeypatch.setenv("RANK", "6")
    monkeypatch.setattr(profile_run.os, "execv", lambda path, argv: calls.append((path, argv)))
    profile_run.exec_under_nsys(["--nsys", "/opt/nsys", "--trace-dir", "/r/profile", "--steps", "11"])
    path, argv = calls[0]
    assert path == "/opt/nsys" and "--output=/r/profile/rank_6" in argv
    assert argv[-4:] == ["--trace-dir", "/r/profile", "--steps", "11"] and "--nsys" not in argv[1:]
    assert argv[argv.index("-m") - 1] == sys.executable


def test_stage_commands_and_capture_choice(monkeypatch, tmp_path):
    export = profile.nsys_export_command("/opt/nsys", tmp_path / "rank_0.nsys-rep")
    assert export[:4] == ["/opt/nsys", "export", "--type", "sqlite"]
    assert export[export.index("--output") + 1] == str(tmp_path / "rank_0.sqlite")
    assert export[-1] == str(tmp_path / "rank_0.nsys-rep")

    monkeypatch.setattr(profile.shutil, "which", lambda name: "/opt/nsys" if name == "nsys" else None)
    assert profile.capture_tool(NCCL_GPU) == ("nsys", "/opt/nsys")
    assert profile.capture_tool(GLOO_CPU) == ("torch.profiler", None)
    args = profile.worker_args(NCCL_GPU, tmp_path, "/opt/nsys")
    assert args[:2] == ["--nsys", "/opt/nsys"] and args[args.index("--capture") + 1] == "cuda-profiler-api"
    assert args[args.index("--steps") + 1] == "11"  # ~10 steps: 10 analysed, the last profiled one left out
    monkeypatch.setattr(profile.shutil, "which", lambda name: None)
    assert profile.capture_tool(NCCL_GPU) == ("torch.profiler", None)
    assert "--nsys" not in profile.worker_args(NCCL_GPU, tmp_path, None)


# ---------------------------------------------------------------- profile: judge and timeline


def timelines(overlapping: bool) -> list[traces.RankTimeline]:
    out = []
    for rank in range(8):
        t = traces.RankTimeline(rank=rank, source="nsys", compute=[(0.0, 800.0)])
        t.comm = [(600.0, 900.0)] if overlapping else [(800.0, 1000.0)]
        out.append(t)
    return out


def test_profile_judge_warns_when_communication_is_serial_on_gpu():
    facts = {**GPU_FACTS, "trace_capture": {"tool": "nsys", "files": ["rank_0.sqlite"], "fallback": False}}
    serial = by_id(profile.judge(profile.analysis_rows(timelines(False), "nsys", 8), [], facts))
    assert serial["profile.overlap.rank0"].status == "warn"
    assert "communication and compute serial on the timeline" in serial["profile.overlap.rank0"].reason
    assert serial["profile.traces"].status == "pass" and serial["profile.capture"].status == "pass"
    ok = by_id(profile.judge(profile.analysis_rows(timelines(True), "nsys", 8), [], facts))
    assert ok["profile.overlap.rank3"].status == "pass"  # 200 of 300 µs overlapped


def test_profile_judge_on_cpu_and_with_missing_ranks_or_fallback():
    rows = profile.analysis_rows(timelines(True)[:4], "torch.profiler", 4)
    facts = {**CPU_FACTS, "trace_capture": {"tool": "torch.profiler", "files": [], "fallback": False}}
    v = by_id(profile.judge(rows, [], facts))
    assert v["profile.overlap.rank0"].status == "skip" and v["profile.traces"].status == "pass"
    short = by_id(profile.judge(rows[: 6 * 3], [], facts))
    assert short["profile.traces"].status == "fail" and "[3]" in short["profile.traces"].reason
    fallback = {**GPU_FACTS, "trace_capture": {"tool": "torch.profiler", "files": [], "fallback": True}}
    assert by_id(profile.judge(rows, [], fallback))["profile.capture"].status == "warn"


def test_timeline_window_is_about_one_step_ending_with_the_last_all_reduce():
    t = traces.RankTimeline(
        rank=0,
        source="kineto-cpu",
        compute=[(0, 80), (100, 180), (200, 280)],
        comm=[(70, 95), (170, 195), (270, 295)],
    )
    (w,) = profile.timeline_windows([t], steps=3)["ranks"]
    assert 95 <= w["length_us"] <= 105  # (295 − 0) / 3 ≈ 98 µs, plus 5% after the last all-reduce
    assert w["comm"][-1][1] == pytest.approx(w["length_us"])
    assert all(0 <= s < e <= w["length_us"] for s, e in w["compute"] + w["comm"])


# ---------------------------------------------------------------- figures


def test_figures_draw_from_rows_and_facts():
    rows = pd.DataFrame(
        [
            r.to_dict()
            for r in overlap_rows(
                {"no_overlap": 0.1, "bucket_1MB": 0.12, "bucket_25MB": 0.08}, buckets={"bucket_1MB": "1 2 3"}
            )
            + overlap.derived_rows(
                overlap_rows({"no_overlap": 0.1, "bucket_1MB": 0.12}, buckets={"bucket_1MB": "1 2 3"}),
                4,
                5e-6,
                2e11,
            )
        ]
    )
    figs = overlap_figures.figures(rows, pd.DataFrame(), GPU_FACTS)
    assert len(figs) == 2 and all(isinstance(f, Figure) for f in figs)
    heights = [p.get_height() for p in figs[0].axes[0].patches]
    assert heights == pytest.approx([100.0, 120.0, 80.0])  # no overlap first, then by bucket size

    prow = pd.DataFrame([r.to_dict() for r in profile.analysis_rows(timelines(True)[:2], "nsys", 2)])
    facts = {
        **GPU_FACTS,
        "trace_capture": {"tool": "nsys"},
        "trace_timeline": profile.timeline_windows(timelines(True)[:2], 1),
    }
    figs = profile_figures.figures(prow, pd.DataFrame(), facts)
    assert len(figs) == 2
    assert "Timeline per rank (nsys)" in figs[0].axes[0].get_title()
    assert len(figs[0].axes[0].get_yticks()) == 4  # two ranks × (compute, comm)
    assert profile_figures.figures(pd.DataFrame(), pd.DataFrame(), {}) == []
    assert math.isnan(overlap_figures._value(rows, "bucket_7MB", "step_time_s"))
