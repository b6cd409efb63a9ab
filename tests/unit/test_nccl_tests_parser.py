"""suite/parsers/nccl_tests.py on every real capture in tests/data/nccl-tests/, then on the formats
nccl-tests' source prints that no capture here shows (per-iteration columns, -J JSON, nan, hangs)."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from suite.parsers import ParseError
from suite.parsers.nccl_tests import MAX_LINE, SNIFF_LINES, bounded_lines, parse, parse_file, program_name

DATA = Path(__file__).resolve().parents[1] / "data" / "nccl-tests"
CAPTURES = sorted(DATA.glob("*.txt"))
ROOT = Path(__file__).resolve().parents[2]


def expected_of(capture: Path) -> dict:
    return json.loads(capture.with_suffix(".json").read_text())


def number(text: str | None):
    """A value as the capture prints it → what the parser returns (N/A → None)."""
    if text is None or text == "N/A":
        return None
    return float(text)


def test_there_are_real_captures():
    assert len(CAPTURES) >= 11


@pytest.mark.parametrize("capture", CAPTURES, ids=lambda p: p.stem[:40])
def test_capture_parses_to_its_recorded_values(capture: Path):
    exp = expected_of(capture)
    got = parse_file(capture)
    assert got["collective"] == exp["collective"]
    assert got["nranks"] == exp["nranks"]
    assert len(got["rows"]) == exp["data_rows"]
    assert got["avg_busbw"] == exp["avg_bus_bandwidth"]
    oob = exp["out_of_bounds"]
    assert got["oob"] == (None if oob is None else {"count": oob["count"], "ok": oob["status"] == "OK"})
    if "complete" in exp:
        assert got["complete"] is exp["complete"]
    big = exp["largest_size_row"]
    if big is None:
        return
    row = [r for r in got["rows"] if r["size"] == big["size_bytes"]][-1]
    assert row["count"] == big["count"]
    ms = "ms" if "bytes-N-ms" in capture.name else "us"
    for half, key in (("oop", "out_of_place"), ("ip", "in_place")):
        want = big[key]
        time = number(want["time_us"]) * (1000 if ms == "ms" else 1)
        assert row[half]["time_us"] == pytest.approx(time, rel=1e-12)
        assert row[half]["algbw"] == number(want["algbw_GBps"])
        assert row[half]["busbw"] == number(want["busbw_GBps"])
        assert row[half]["wrong"] == number(want["wrong"])


def test_rows_keep_every_printed_row_in_order_zero_size_included():
    got = parse_file(DATA / "05-a100-reduce_scatter-2021fmt-validation0-zero-size-rows.txt")
    sizes = [r["size"] for r in got["rows"]]
    assert sizes[:6] == [0, 0, 0, 0, 0, 32]
    assert got["rows"][0]["oop"] == {"time_us": 34.88, "algbw": 0.0, "busbw": 0.0, "wrong": None}
    assert got["wrong_kind"] == "max_deviation"


def test_aborted_run_is_incomplete_with_the_failure_as_reason():
    got = parse_file(DATA / "17-rtx5090-all_reduce-2gpu-aborted-ncclwarn-test-failure.txt")
    assert got["complete"] is False
    assert "Test NCCL failure common.cu:392" in got["reason"]
    assert got["rows"] == []


def test_oldest_format_reads_time_in_ms_and_the_op_column():
    got = parse_file(DATA / "23-titanx-all_reduce-nccl1-bytes-N-ms.txt")
    first = got["rows"][0]
    assert (first["type"], first["redop"], first["root"]) == ("char", "sum", None)
    assert first["oop"]["time_us"] == pytest.approx(1628.0)
    assert "no footer" in got["reason"]


# ---------------------------------------------------------------- formats from nccl-tests' source
# (constructed)

HEADER_219 = """# nccl-tests version 2.19.6 nccl-headers=22803 nccl-library=22803
# Collective test starting: alltoall_perf
# nThread 1 nGpus 2 minBytes 8 maxBytes 64 step: 2(factor) warmup iters: 1 iters: 20 agg iters: 1 validation: 1 graph: 0 unalign: 0
#
# Using devices
#  Rank  0 Group  0 Pid  100 on       box device  0 [0000:19:00] NVIDIA H200
#  Rank  1 Group  0 Pid  100 on       box device  1 [0000:3b:00] NVIDIA H200
#
"""  # noqa: E501


def test_per_iteration_columns_and_nan_and_e_notation():
    text = (
        HEADER_219
        + """#                                                              out-of-place (+ per-iteration)                                in-place (+ per-iteration)
#       size         count      type   redop    root     time   algbw   busbw  #wrong    i_min    i_max    i_p99    i_cv%     time   algbw   busbw  #wrong    i_min    i_max    i_p99    i_cv%
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)     (us)     (us)      (%)     (us)  (GB/s)  (GB/s)             (us)     (us)     (us)      (%)
          16             4     float    none      -1    10.50    0.00    0.00       0     9.90    12.00    12.00     5.10    10.20    0.00    0.00     N/A     9.80    11.00    11.00     4.00
          32             8     float    none      -1      nan     nan     nan  2.68435e+08     9.90    12.00    12.00     5.10    10.20    0.00    0.00     N/A     9.80    11.00    11.00     4.00
# Out of bounds values : 1 FAILED
# Avg bus bandwidth    : nan 
#
# Collective test concluded: alltoall_perf
"""  # noqa: E501
    )
    got = parse(text)
    assert got["collective"] == "alltoall" and got["nranks"] == 2
    assert got["version"].startswith("nccl-tests version 2.19.6")
    a, b = got["rows"]
    assert a["oop"] == {
        "time_us": 10.5,
        "algbw": 0.0,
        "busbw": 0.0,
        "wrong": 0,
        "i_min_us": 9.9,
        "i_max_us": 12.0,
        "i_p99_us": 12.0,
        "i_cv_pct": 5.1,
    }
    assert a["ip"]["wrong"] is None and a["redop"] == "none" and a["root"] == -1
    assert b["oop"]["time_us"] is None and b["oop"]["busbw"] is None
    assert b["oop"]["wrong"] == 268435000
    assert got["oob"] == {"count": 1, "ok": False}
    assert got["avg_busbw"] is None and got["complete"] is True


def test_old_alltoall_with_a_blank_redop_field():
    text = """# nThread 1 nGpus 4 minBytes 8 maxBytes 16 step: 2(factor) warmup iters: 5 iters: 20 validation: 1
#
#                                                       out-of-place                       in-place
#       size         count      type   redop     time   algbw   busbw  error     time   algbw   busbw  error
#        (B)    (elements)                       (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
           0             0     float             12.01    0.00    0.00  0e+00    11.90    0.00    0.00    N/A
          16             4     float             13.50    0.00    0.00  0e+00    13.40    0.00    0.00    N/A
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 0
"""  # noqa: E501
    got = parse(text, name_hint="alltoall_perf.out")
    assert got["collective"] == "alltoall"
    assert [r["redop"] for r in got["rows"]] == [None, None]
    assert got["rows"][1]["oop"]["time_us"] == 13.5 and got["rows"][1]["ip"]["wrong"] is None


def test_hang_after_header_and_abort_mid_row():
    header = (
        HEADER_219
        + """#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
"""  # noqa: E501
    )
    hung = parse(header)
    assert hung["complete"] is False and "after the table header" in hung["reason"] and hung["rows"] == []
    cut = parse(
        header
        + "           8             2     float    none      -1    10.50    0.00    0.00      0    10.20    "
        "0.00    0.00    N/A\n"
        "          16             4     float    none      -1box: Test CUDA failure common.cu:1000 'an "
        "illegal memory access'\n"
    )
    assert len(cut["rows"]) == 1 and cut["complete"] is False
    assert "Test CUDA failure" in cut["reason"]
    no_footer = parse(
        header
        + "           8             2     float    none      -1    10.50    0.00    0.00      0    10.20    "
        "0.00    0.00    N/A\n"
    )
    assert no_footer["complete"] is False and "no footer after 1 rows" in no_footer["reason"]


def test_timestamp_column_is_dropped():
    text = """#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong           timestamp
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)   %Y-%m-%d %H:%M:%S
           8             2     float     sum      -1    10.50    0.00    0.00      0    10.20    0.00    0.00      0  2025-09-01 10:11:12
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 0.001 OK
"""  # noqa: E501
    row = parse(text)["rows"][0]
    assert row["ip"] == {"time_us": 10.2, "algbw": 0.0, "busbw": 0.0, "wrong": 0}


def json_report(**changes) -> str:
    data = {
        "version": 3,
        "start_time": "2025-09-01 10:00:00",
        "args": ["./build/all_gather_perf", "-b", "8", "-J", "x.json"],
        "env": [],
        "nccl_version": 22803,
        "config": {"nthreads": 1, "ngpus": 2, "devices": [{"rank": 0, "group": 0}, {"rank": 1, "group": 0}]},
        "results": [
            {
                "size": 8,
                "count": 1,
                "type": "float",
                "redop": "none",
                "root": "    -1",
                "out_of_place": {"time": 11.5, "alg_bw": 0.0007, "bus_bw": 0.00035, "nwrong": 0.0},
                "in_place": {"time": 11.0, "alg_bw": 0.0007, "bus_bw": 0.00035, "nwrong": None},
                "actual_iterations": 20,
                "experiment_name": "",
            },
            {
                "size": 16,
                "count": 2,
                "type": "float",
                "redop": "none",
                "root": "    -1",
                "out_of_place": {"time": "nan", "alg_bw": "nan", "bus_bw": "nan", "nwrong": 3.0},
                "in_place": {"time": 11.0, "alg_bw": 0.0015, "bus_bw": 0.0007, "nwrong": 0.0},
                "actual_iterations": 20,
                "experiment_name": "",
            },
        ],
        "out_of_bounds": {"count": 1, "okay": False},
        "average_bus_bandwidth": {"bandwidth": 0.0005, "okay": "unchecked"},
        "errors": [],
        "end_time": "2025-09-01 10:00:01",
    }
    data.update(changes)
    return json.dumps(data)


def test_json_report():
    got = parse(json_report())
    assert got["collective"] == "all_gather" and got["nranks"] == 2 and got["complete"] is True
    assert got["rows"][0]["root"] == -1
    assert got["rows"][0]["oop"] == {"time_us": 11.5, "algbw": 0.0007, "busbw": 0.00035, "wrong": 0}
    assert got["rows"][0]["ip"]["wrong"] is None
    assert got["rows"][1]["oop"]["time_us"] is None and got["rows"][1]["oop"]["wrong"] == 3
    assert got["oob"] == {"count": 1, "ok": False} and got["avg_busbw"] == 0.0005


def test_json_report_cut_short_is_incomplete():
    data = json.loads(json_report())
    del data["out_of_bounds"], data["end_time"]
    got = parse(json.dumps(data))
    assert got["complete"] is False and "no footer" in got["reason"]


def test_program_names():
    assert program_name("/opt/nccl-tests/build/all_reduce_perf_mpi") == "all_reduce"
    assert program_name("reduce_scatter_perf.out") == "reduce_scatter"
    assert program_name("sendrecv_perf.NCCL_ALGO-Ring.out") == "sendrecv"
    assert program_name("notes.txt") is None


@pytest.mark.parametrize("text", ["", "hello world\nnothing here\n", '{"a": 1}', "{not json"])
def test_bad_input_is_a_parse_error(text):
    with pytest.raises(ParseError):
        parse(text)


def test_cli_prints_json_and_exits_2_on_bad_input(tmp_path):
    capture = DATA / "15-rtx4090-all_reduce-4gpu-pcie-docker.txt"
    ok = subprocess.run(
        [sys.executable, "-m", "suite", "parse", "nccl-tests", str(capture), "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ok.returncode == 0, ok.stderr
    data = json.loads(ok.stdout)
    assert {"collective", "nranks", "rows", "avg_busbw", "oob", "complete"} <= set(data)
    assert data["rows"][0] == {
        "size": 8,
        "count": 2,
        "type": "float",
        "redop": "sum",
        "root": -1,
        "oop": {"time_us": 18.9, "algbw": 0.0, "busbw": 0.0, "wrong": 0},
        "ip": {"time_us": 19.54, "algbw": 0.0, "busbw": 0.0, "wrong": 0},
    }
    bad = tmp_path / "bad.txt"
    bad.write_text("this is not an nccl-tests output\n")
    out = subprocess.run(
        [sys.executable, "-m", "suite", "parse", "nccl-tests", str(bad), "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2
    assert len(out.stderr.strip().splitlines()) == 1 and "not nccl-tests output" in out.stderr


def test_a_file_of_several_tests_is_read_up_to_the_second():
    got = parse_file(DATA / "25-gtx1080ti-all_gather-2019-no-header-busbw-equals-algbw.txt")
    assert got["collective"] == "all_gather"  # not broadcast, which the command after the footer names
    assert got["next_test_line"] == 17 and len(got["rows"]) == 12
    assert got["wrong_kind"] == "max_deviation"
    assert all(r["redop"] is None and r["root"] is None for r in got["rows"])


def test_a_capture_cut_mid_table_keeps_its_rows_and_says_it_is_partial(tmp_path):
    """A real capture cut in the middle of its 9th data row, as a killed `tee` or a full disk leaves it."""
    lines = (
        (DATA / "10-h100-all_reduce-2node-16rank-mpi-warnings-interleaved.txt").read_text().splitlines(True)
    )
    first = next(i for i, line in enumerate(lines) if line.split()[:1] == ["8"])
    cut = tmp_path / "all_reduce_perf.out"
    cut.write_text("".join(lines[: first + 8]) + lines[first + 8][:40])
    got = parse_file(cut)
    assert [r["size"] for r in got["rows"]] == [8 * 2**k for k in range(8)]
    assert got["complete"] is False and "cut" in got["reason"]


def test_the_decision_is_made_on_the_first_lines(tmp_path):
    """Output preceded by more than SNIFF_LINES lines of something else is refused; a launcher's usual
    preamble of warnings (here 500 lines) is not."""
    capture = (DATA / "15-rtx4090-all_reduce-4gpu-pcie-docker.txt").read_text()
    noise = "".join(f"[host:{i}] mca warning: nothing to see here\n" for i in range(SNIFF_LINES + 10))
    buried = tmp_path / "buried.txt"
    buried.write_text(noise + capture)
    with pytest.raises(ParseError, match=f"first {SNIFF_LINES} lines"):
        parse_file(buried)
    preceded = tmp_path / "preceded.txt"
    preceded.write_text(noise[: noise.index("[host:500]")] + capture)
    assert (
        len(parse_file(preceded)["rows"])
        == len(parse_file(DATA / "15-rtx4090-all_reduce-4gpu-pcie-docker.txt")["rows"])
        > 0
    )


def test_an_overlong_line_is_cut_not_held(tmp_path):
    """A 4 MiB line (a binary blob decoded as text) between the rank lines and the table: read past, cut at
    MAX_LINE, and the line numbers after it stay right."""
    lines = (DATA / "15-rtx4090-all_reduce-4gpu-pcie-docker.txt").read_text().splitlines(True)
    blob = tmp_path / "blob.txt"
    blob.write_text(lines[0] + "x" * (4 << 20) + "\n" + "".join(lines[1:]))
    assert next(bounded_lines(io.StringIO("y" * (3 * MAX_LINE) + "\nnext\n"))) == "y" * MAX_LINE
    assert list(bounded_lines(io.StringIO("y" * (3 * MAX_LINE) + "\nnext\n")))[1:] == ["next\n"]
    got = parse_file(blob)
    assert got["complete"] is True and len(got["rows"]) == len(
        parse_file(DATA / "15-rtx4090-all_reduce-4gpu-pcie-docker.txt")["rows"]
    )


def test_a_json_file_is_read_up_to_a_bound(tmp_path, monkeypatch):
    import suite.parsers.nccl_tests as module

    big = tmp_path / "report.json"
    big.write_text(json.dumps({"config": {}, "results": [{"size": 8}] * 50}))
    assert len(parse_file(big)["rows"]) == 50
    monkeypatch.setattr(module, "MAX_JSON", 100)
    with pytest.raises(ParseError, match="JSON document over"):
        parse_file(big)


def test_bytes_that_are_not_text_are_a_parse_error(tmp_path):
    capture = (DATA / "15-rtx4090-all_reduce-4gpu-pcie-docker.txt").read_bytes()
    spoiled = tmp_path / "spoiled.txt"
    spoiled.write_bytes(capture[:200] + b"\xff\xfe" + capture[200:])
    with pytest.raises(ParseError, match="not text"):
        parse_file(spoiled)
