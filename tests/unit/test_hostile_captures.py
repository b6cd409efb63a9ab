"""Captures from a box the user does not control, and outputs that cannot take what is written: names carrying
terminal escapes never reach the terminal, the files or the page as control characters; no output option
writes onto a run's records or the command's inputs; a closed pipe or a full disk is one line and exit 2.

One hostile ingest (real captures: a 4×RTX 4090 nccl-tests run, an H200's `nvidia-smi -q`, an 8-GPU `topo -m`,
with escape sequences planted in the GPU name, the host name and the file name) serves every test that reads
it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from reports.render import environment
from suite.cli_streams import InertStream
from suite.inert import inert, inert_texts
from suite.output_target import overwrite_problem
from suite.results import Row, Verdict

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
# Erase the line above, write a green PASS, retitle the window, return to the line's start, reverse what
# follows.
FORGERY = "\x1b[1A\x1b[2K\x1b[32mPASS\x1b]0;owned\x07\r\u202e"
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _cli(*argv: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *argv], capture_output=True, text=True, cwd=ROOT, timeout=120, **kw
    )


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    """The hostile captures ingested once, then checked and reported: every line each command printed."""
    folder = tmp_path_factory.mktemp("hostile")
    sweep = (DATA / "nccl-tests" / "15-rtx4090-all_reduce-4gpu-pcie-docker.txt").read_text()
    sweep = re.sub(r"(on )(\S+)( device)", lambda m: f"{m.group(1)}box{FORGERY}{m.group(3)}", sweep)
    sweep = sweep.replace("NVIDIA GeForce RTX 4090", "NVIDIA GeForce RTX 4090" + FORGERY)
    (folder / f"all_reduce_perf{FORGERY.replace('/', '')}.txt").write_text(sweep)
    smi = (DATA / "health" / "nvsmi-q-08-h200-550-healthy.txt").read_text()
    (folder / "smi-q.txt").write_text(smi.replace(": NVIDIA H200", ": NVIDIA H200" + FORGERY, 1))
    (folder / "topo.txt").write_text((DATA / "topo" / "14-rtx4090-8gpu-sys-2nic.txt").read_text())
    runs, last = folder / "runs", folder / "LAST"
    captures = sorted(str(p) for p in folder.glob("*.txt"))
    ingest = _cli("-m", "suite", "ingest", *captures, "--out", str(runs), "--record-last", str(last))
    run = Path(last.read_text().strip())
    # every verdict printed: every hostile name reaches it
    check = _cli("-m", "suite", "check", "-v", str(run))
    report = _cli("-m", "reports", str(run))
    return {"run": run, "folder": folder, "ingest": ingest, "check": check, "report": report}


def test_the_forgery_reached_the_verdicts_so_the_check_below_means_something(hostile):
    verdicts = json.loads((hostile["run"] / "verdicts.json").read_text())["verdicts"]
    assert any("NVIDIA H200\\x1b[1A" in v["expected"] for v in verdicts)
    # the capture's file name, in the manifest as its escape (JSON doubles the backslash)
    assert r"\\x1b]0;owned\\x07\\x0d\\u202e" in (hostile["run"] / "manifest.json").read_text()


def test_no_line_printed_after_ingesting_hostile_names_holds_a_control_byte(hostile):
    for command in ("ingest", "check", "report"):
        done = hostile[command]
        assert done.returncode in (0, 1, 3), (command, done.stderr[-500:])
        for line in (done.stdout + done.stderr).split("\n"):
            assert not CONTROL.search(line), f"{command} printed {line!r}"
    assert hostile["check"].stdout.count("\n") > 10  # the verdict table was printed, not an error


def test_the_run_files_and_the_page_hold_no_control_character(hostile):
    run = hostile["run"]
    for name in ("verdicts.json", "results.csv", "expectations.csv", "report.html"):
        text = (run / name).read_text(encoding="utf-8")
        assert not CONTROL.search(text), name
    manifest = json.loads((run / "manifest.json").read_text())
    assert not CONTROL.search(json.dumps(manifest, ensure_ascii=False))
    assert "owned" in (run / "report.html").read_text()  # shown, as its escape


def test_inert_shows_each_control_as_its_escape_and_leaves_text_alone():
    assert inert("H100\x1b[32m ok\r\n\tnext") == "H100\\x1b[32m ok\\x0d\n\tnext"
    assert inert("\x9b31m \u202egnp.exe \u2028") == "\\x9b31m \\u202egnp.exe \\u2028"
    assert inert("NVIDIA H100 80GB HBM3 — 700 W, µs, 日本") == "NVIDIA H100 80GB HBM3 — 700 W, µs, 日本"
    assert inert_texts({"gpu\x1b": ["x\x07", 3, None]}) == {"gpu\\x1b": ["x\\x07", 3, None]}


def test_rows_and_verdicts_built_from_a_capture_are_inert():
    v = Verdict(
        id="health.x",
        stage="health",
        status="fail",
        expected="A100\x1b[2K",
        observed="ok\rPASS",
        reason="line\nnext",
    )
    assert (v.expected, v.observed, v.reason) == ("A100\\x1b[2K", "ok\\x0dPASS", "line\nnext")
    row = Row(
        stage="topology", case="gpu\x1b", metric="name", value=float("nan"), unit="", text="H200\x1b]0;t\x07"
    )
    assert (row.case, row.text) == ("gpu\\x1b", "H200\\x1b]0;t\\x07")


def test_the_page_shows_markup_as_text_and_controls_as_escapes():
    page = environment().from_string("<p>{{ name }}</p>").render(name="<script>x()</script>\u202e\x1b[2K")
    assert page == "<p>&lt;script&gt;x()&lt;/script&gt;\\u202e\\x1b[2K</p>"


def test_a_stream_keeps_the_callers_own_sequence_and_escapes_the_rest(tmp_path):
    with open(tmp_path / "out", "w") as raw:
        stream = InertStream(raw, "stdout")
        stream.control("\r\x1b[2K")
        stream.write("[1/2] health \x1b[1A done\n")
    assert (tmp_path / "out").read_bytes().decode() == "\r\x1b[2K[1/2] health \\x1b[1A done\n"


# ---------------------------------------------------------------- outputs


@pytest.mark.parametrize(
    "name",
    [
        "manifest.json",
        "results.parquet",
        "results.csv",
        "verdicts.json",
        "expectations.csv",
        "raw/health/smi-q.txt",
        "raw/new-file.txt",
    ],
)
def test_the_report_is_never_written_onto_a_record_of_its_run(hostile, name):
    run = hostile["run"]
    before = {p: p.read_bytes() for p in run.rglob("*") if p.is_file()}
    done = _cli("-m", "reports", str(run), "-o", str(run / name))
    assert done.returncode == 2
    assert (
        done.stderr.count("\n") == 1 and "never overwritten" in done.stderr and str(run / name) in done.stderr
    )
    assert {p: p.read_bytes() for p in run.rglob("*") if p.is_file()} == before


def test_compare_and_record_last_refuse_a_run_record_and_an_input(hostile, tmp_path):
    run, folder = hostile["run"], hostile["folder"]
    before = (run / "results.parquet").read_bytes(), (folder / "topo.txt").read_bytes()
    compare = _cli("-m", "reports", "compare", str(run), str(run), "-o", str(run / "results.parquet"))
    ingest = _cli(
        "-m",
        "suite",
        "ingest",
        str(folder / "topo.txt"),
        "--out",
        str(tmp_path / "runs"),
        "--record-last",
        str(folder / "topo.txt"),
    )
    rehearse = _cli(
        "-m",
        "suite",
        "run",
        "--profile",
        "gloo-cpu",
        "--stages",
        "topology",
        "--out",
        str(tmp_path / "runs"),
        "--record-last",
        str(run / "manifest.json"),
    )
    for done in (compare, ingest, rehearse):
        assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "is one of this command's inputs" in ingest.stderr
    assert ((run / "results.parquet").read_bytes(), (folder / "topo.txt").read_bytes()) == before
    assert not (tmp_path / "runs").exists()  # refused before any work


def test_the_report_beside_its_run_and_files_outside_runs_are_allowed(hostile, tmp_path):
    run = hostile["run"]
    assert overwrite_problem(run / "report.html", [run]) is None
    assert overwrite_problem(tmp_path / "elsewhere.html", [run]) is None
    assert overwrite_problem(run / "compare.html", [run]) is None  # a new file beside the records
    (tmp_path / "link.html").symlink_to(run / "manifest.json")
    assert "manifest.json" in overwrite_problem(tmp_path / "link.html", [run])


@pytest.mark.parametrize(
    "argv", [("-m", "suite", "check", "--json"), ("-m", "suite", "check"), ("-m", "reports")]
)
def test_a_full_output_is_one_error_line_and_exit_2(hostile, argv):
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [sys.executable, *argv, str(hostile["run"])],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            timeout=120,
        )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1] == "error: cannot write stdout: No space left on device"
    assert "Traceback" not in done.stderr


def test_a_pipe_closed_early_is_one_error_line_and_exit_2(hostile):
    reader, writer = os.pipe()
    os.close(reader)  # nobody reads: the first write meets a closed pipe
    done = subprocess.run(
        [sys.executable, "-m", "suite", "check", str(hostile["run"])],
        stdout=writer,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    os.close(writer)
    assert done.returncode == 2
    assert done.stderr.strip() == "error: stdout was closed before everything was written"
