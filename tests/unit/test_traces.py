"""The comm/compute overlap analysis: a real 128-rank GPU trace against Holistic Trace Analysis' figure,
a real gloo CPU trace, nsys-shaped SQLite exports built here, and the interval arithmetic."""

from __future__ import annotations

import gzip
import json
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from suite.parsers import ParseError, traces

DATA = Path(__file__).resolve().parent.parent / "data" / "traces"
GPU_TRACE = DATA / "hta-sampled_rank-0.json.gz"
CPU_TRACE = DATA / "gloo-cpu-ddp_rank0.trace.json.gz"
REPO = Path(__file__).resolve().parents[2]


# ---------------------------------------------------------------- the real GPU trace vs HTA


def test_overlap_agrees_with_holistic_trace_analysis_on_the_real_gpu_trace():
    hta = json.loads((DATA / "hta-sampled_rank-0.hta.json").read_text())
    ours = traces.parse_file(GPU_TRACE)["ranks"]
    assert [r["rank"] for r in ours] == [0]
    assert abs(ours[0]["overlap_pct"] - hta["ranks"][0]["comp_comm_overlap_pctg"]) <= 0.5
    assert ours[0]["overlap_us"] <= min(ours[0]["comm_us"], ours[0]["compute_us"])


def test_gpu_trace_classification_follows_kernel_names():
    data = traces.load_json_trace(GPU_TRACE)
    timeline = traces.kineto_timeline(data, traces.rank_of(data, GPU_TRACE))
    assert timeline.source == "kineto-gpu"
    # The trace's only NCCL kernels are ncclKernel_SendRecv: the communication lane is built from them alone.
    nccl = [
        e for e in data["traceEvents"] if e.get("cat") == "kernel" and e["name"].startswith("ncclKernel_")
    ]
    nccl_spans = {(float(e["ts"]), float(e["ts"]) + float(e["dur"])) for e in nccl}
    assert timeline.comm and set(timeline.comm) <= nccl_spans
    assert not nccl_spans & set(timeline.compute)


def test_the_last_profiler_step_is_left_out():
    data = traces.load_json_trace(GPU_TRACE)
    steps = [e for e in data["traceEvents"] if str(e.get("name", "")).startswith("ProfilerStep#")]
    assert len(steps) == 2
    with_last = traces.kineto_timeline(
        {
            "traceEvents": [
                e for e in data["traceEvents"] if not str(e.get("name", "")).startswith("ProfilerStep#")
            ]
        }
    )
    without_last = traces.kineto_timeline(data)
    # Every kernel launched in the second step drops out: fewer kernels, less communication.
    assert len(without_last.comm) < len(with_last.comm)
    assert len(without_last.compute) < len(with_last.compute)


# ---------------------------------------------------------------- the real gloo CPU trace


def test_cpu_trace_sets_gloo_spans_against_main_thread_ops():
    data = traces.load_json_trace(CPU_TRACE)
    assert traces.rank_of(data, CPU_TRACE) == data["distributedInfo"]["rank"] == 0
    timeline = traces.kineto_timeline(data, 0)
    assert timeline.source == "kineto-cpu"
    events = [e for e in data["traceEvents"] if e.get("ph") == "X"]
    gloo = {
        (float(e["ts"]), float(e["ts"]) + float(e["dur"])) for e in events if e["name"].startswith("gloo:")
    }
    assert timeline.comm and set(timeline.comm) <= gloo
    # Compute lies on the main thread only, and never inside an enqueue op (c10d::allreduce_).
    main = traces.main_thread(events, [e for e in events if e.get("cat") == "cpu_op"])
    gloo_tids = {e["tid"] for e in events if e["name"].startswith("gloo:")}
    assert main[1] not in gloo_tids
    enqueue = traces.merge(
        (float(e["ts"]), float(e["ts"]) + float(e["dur"]))
        for e in events
        if e.get("cat") == "cpu_op" and e["name"].startswith("c10d::")
    )
    assert enqueue
    assert traces.intersection(traces.merge(timeline.compute), enqueue) == 0.0
    o = timeline.overlap()
    assert o.comm_us > 0 and o.compute_us > 0
    assert 0 <= o.overlap_us <= min(o.comm_us, o.compute_us)
    assert o.comm_us + o.compute_us - o.overlap_us <= o.window_us + 1e-6


def test_parse_command_prints_per_rank_json_for_a_torch_trace():
    done = subprocess.run(
        [sys.executable, "-m", "suite", "parse", "trace", str(CPU_TRACE), "--json"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    ranks = json.loads(done.stdout)["ranks"]
    assert set(ranks[0]) == {"rank", "comm_us", "compute_us", "overlap_us", "overlap_pct"}
    expected = traces.kineto_timeline(traces.load_json_trace(CPU_TRACE)).overlap()
    assert ranks[0]["overlap_pct"] == pytest.approx(expected.overlap_pct, abs=1e-3)


def test_plain_json_trace_reads_like_the_gzipped_one(tmp_path):
    plain = tmp_path / "rank3.trace.json"
    data = json.loads(gzip.open(CPU_TRACE, "rt").read())
    del data["distributedInfo"]
    plain.write_text(json.dumps(data))
    got = traces.parse_file(plain)["ranks"][0]
    assert got["rank"] == 3  # from the file name when distributedInfo is absent
    assert got["comm_us"] == traces.parse_file(CPU_TRACE)["ranks"][0]["comm_us"]


def test_not_a_trace_is_a_parse_error(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text('{"hello": 1}')
    with pytest.raises(ParseError, match="traceEvents"):
        traces.parse_file(bad)
    done = subprocess.run(
        [sys.executable, "-m", "suite", "parse", "trace", str(bad)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1


# ---------------------------------------------------------------- nsys SQLite exports


def nsys_db(path: Path, kernels: list[tuple[int, int, int, int, str]], *, schema: str = "ids") -> Path:
    """An `nsys export --type sqlite`-shaped file: kernels as (start ns, end ns, deviceId, streamId, name)."""
    conn = sqlite3.connect(path)
    if schema == "ids":
        conn.execute("CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL)")
        conn.execute(
            "CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER NOT NULL, end INTEGER NOT NULL, "
            "deviceId INTEGER NOT NULL, contextId INTEGER, streamId INTEGER NOT NULL, "
            "correlationId INTEGER, globalPid INTEGER, demangledName INTEGER NOT NULL, "
            "shortName INTEGER NOT NULL, mangledName INTEGER)"
        )
        names: dict[str, int] = {}
        for i, (start, end, dev, stream, name) in enumerate(kernels):
            short = re.split(r"[<(]", name.removeprefix("void "))[0].split("::")[-1]
            for text in (name, short):
                if text not in names:
                    names[text] = len(names) + 1
                    conn.execute("INSERT INTO StringIds VALUES (?, ?)", (names[text], text))
            conn.execute(
                "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?,?,?,?,?,?,?,?,?,?)",
                (start, end, dev, 1, stream, i, 100, names[name], names[short], None),
            )
    else:  # very old exports: the name as text in a `name` column
        conn.execute(
            "CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER, end INTEGER, deviceId INTEGER, "
            "streamId INTEGER, name TEXT)"
        )
        conn.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?,?,?,?,?)", kernels)
    conn.commit()
    conn.close()
    return path


GEMM = "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_32x4_nt_align1>(Params)"
ELEMENTWISE = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>(int)"
NCCL_NEW = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
NCCL_SYM = "ncclSymDevKernel_AllReduce_RSxLD_AGxST_sum_bf16(ncclSymDevArgs)"
NCCL_OLD = "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)"

# Device 0, in µs: compute [0, 100] and [50, 150] (merged [0, 150]) and [400, 500]; communication
# [120, 300] and [250, 420] (merged [120, 420]). comm 300, compute 250, overlap [120,150] + [400,420] = 50.
DEVICE0 = [
    (0, 100_000, 0, 7, GEMM),
    (50_000, 150_000, 0, 7, ELEMENTWISE),
    (400_000, 500_000, 0, 7, GEMM),
    (120_000, 300_000, 0, 20, NCCL_NEW),
    (250_000, 420_000, 0, 20, NCCL_SYM),
]
# Device 1: communication strictly after compute: overlap 0.
DEVICE1 = [(0, 200_000, 1, 7, GEMM), (200_000, 260_000, 1, 21, NCCL_OLD)]


def test_nsys_export_per_device_with_hand_computed_overlap(tmp_path):
    db = nsys_db(tmp_path / "report.sqlite", DEVICE0 + DEVICE1)
    ranks = {r["rank"]: r for r in traces.parse_file(db)["ranks"]}
    assert ranks[0] == {
        "rank": 0,
        "comm_us": 300.0,
        "compute_us": 250.0,
        "overlap_us": 50.0,
        "overlap_pct": pytest.approx(100 * 50 / 300, abs=1e-3),
    }
    assert ranks[1] == {
        "rank": 1,
        "comm_us": 60.0,
        "compute_us": 200.0,
        "overlap_us": 0.0,
        "overlap_pct": 0.0,
    }


def test_a_per_rank_report_takes_its_rank_from_the_file_name(tmp_path):
    db = nsys_db(tmp_path / "rank_5.sqlite", [(s, e, 0, st, n) for s, e, _, st, n in DEVICE0])
    assert [r["rank"] for r in traces.parse_file(db)["ranks"]] == [5]


def test_old_exports_with_a_name_column(tmp_path):
    db = nsys_db(tmp_path / "old.sqlite", DEVICE0, schema="name")
    (rank,) = traces.parse_file(db)["ranks"]
    assert (rank["comm_us"], rank["compute_us"], rank["overlap_us"]) == (300.0, 250.0, 50.0)


def test_missing_tables(tmp_path):
    empty = tmp_path / "empty.sqlite"
    sqlite3.connect(empty).execute(
        "CREATE TABLE TARGET_INFO_SESSION_START_TIME (utcEpochNs INTEGER)"
    ).connection.commit()
    assert traces.parse_file(empty) == {"ranks": []}  # no kernel captured: the table is never created

    no_strings = nsys_db(tmp_path / "nostrings.sqlite", DEVICE0)
    conn = sqlite3.connect(no_strings)
    conn.execute("DROP TABLE StringIds")
    conn.commit()
    conn.close()
    with pytest.raises(ParseError, match="StringIds"):
        traces.parse_file(no_strings)


def test_not_sqlite_is_a_parse_error(tmp_path):
    fake = tmp_path / "rank_0.sqlite"
    fake.write_text("nsys report, not exported")
    with pytest.raises(ParseError, match="nsys export --type sqlite"):
        traces.parse_file(fake)


def test_an_unexported_nsys_report_names_the_export_command(tmp_path):
    report = tmp_path / "rank_0.nsys-rep"
    report.write_bytes(b"\x00binary")
    with pytest.raises(ParseError, match="nsys export --type sqlite -o rank_0.sqlite rank_0.nsys-rep"):
        traces.parse_file(report)


def test_parse_command_reads_an_nsys_export(tmp_path):
    db = nsys_db(tmp_path / "rank_2.sqlite", [(s, e, 0, st, n) for s, e, _, st, n in DEVICE0])
    done = subprocess.run(
        [sys.executable, "-m", "suite", "parse", "trace", str(db), "--json"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["ranks"][0]["overlap_us"] == 50.0


# ---------------------------------------------------------------- patterns and interval arithmetic


@pytest.mark.parametrize("name", [NCCL_NEW, NCCL_SYM, NCCL_OLD, "gloo:all_reduce", "gloo:broadcast"])
def test_communication_pattern_covers_nccl_and_gloo(name):
    assert traces.Classifier().kernel(name) == "comm"


@pytest.mark.parametrize("name", [GEMM, ELEMENTWISE, "ampere_sgemm_128x64_nn", "aten::mm"])
def test_everything_else_is_compute_but_memory(name):
    assert traces.Classifier().kernel(name) == "compute"
    assert traces.Classifier().kernel("Memcpy DtoD (Device -> Device)") == "memory"


def test_the_pattern_is_configurable():
    c = traces.Classifier(comm_pattern=r"^my_allreduce")
    assert c.kernel("my_allreduce_kernel") == "comm"
    assert c.kernel(NCCL_NEW) == "compute"


def test_merge_intersection_subtract():
    assert traces.merge([(5, 7), (0, 2), (1, 3), (3, 4)]) == [(0, 4), (5, 7)]
    a, b = [(0, 10), (20, 30)], [(5, 25), (28, 40)]
    assert traces.intersection(a, b) == 5 + 5 + 2
    assert traces.subtract(a, b) == [(0, 5), (25, 28)]
    assert traces.subtract([(0, 10)], []) == [(0, 10)]
    assert traces.subtract([(0, 10)], [(0, 10)]) == []
    assert traces.clip([(0, 10), (20, 30)], 5, 25) == [(5, 10), (20, 25)]
    assert traces.total(traces.merge([(0, 2), (1, 3)])) == 3
