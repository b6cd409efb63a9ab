"""The library (suite/library/): real-derived runs (the demo's real 8×H100 captures ingested) and synthetic
runs written through the run writer (RunDir), indexed in SQLite; a run placed among 19 others gets its
percentile per figure, its nearest box and its cost per PFLOP-hour; `make plan` learns α and β; shared
summaries round-trip between two libraries, and a damaged, foreign or duplicate one is refused; a summary
carries no host name, address, serial or credential planted in its run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from suite.library import index, place
from suite.library.share import import_files, share
from suite.library.summary import SCHEMA, digest, problem, summarize
from suite.results import Row, RunDir, Verdict

REPO = Path(__file__).resolve().parents[2]
DEMO = [
    "tests/data/topo/30-h100-8gpu-nv18-8nic-env-dump.txt",
    "tests/data/nccl-tests/21-h100-all_reduce-8gpu-mpirun-tag-output.txt",
]
PLANTED = {
    "host": "gpu-node-17.corp.example",
    "address": "10.44.3.21",
    "serial": "1654922007541",
    "token": "hf_" + "Q" * 34,
}
LINKS = {f"GPU{i}-GPU{j}": "NV18" for i in range(8) for j in range(i + 1, 8)}


def suite(*args: str, **env: str) -> subprocess.CompletedProcess:
    """`python -m suite ARGS`; the session's CARDTIME_LIBRARY (tests/conftest.py) replaced or, given as "",
    removed."""
    environ = {k: v for k, v in {**os.environ, **env}.items() if v != ""}
    return subprocess.run(
        [sys.executable, "-m", "suite", *args], cwd=REPO, capture_output=True, text=True, env=environ
    )


def synthetic_run(base: Path, n: int, busbw: float, hbm: float, gemm: float, alpha_us: float, beta: float):
    """A finished 8×H100 run as the runner writes one: manifest, facts, rows and verdicts through RunDir."""
    run = RunDir.create(
        base / f"run{n:02d}",
        {
            "run_id": f"20261{n:03d}T0000Z-{PLANTED['host']}-nccl-gpu",
            "started": f"2026-11-{1 + n:02d}T00:00:00+00:00",
            "profile_name": "nccl-gpu",
            "profile": {"name": "nccl-gpu", "judge_performance": True},
            "host": {"hostname": PLANTED["host"], "address": PLANTED["address"]},
            "versions": {"driver": "570.124.06", "cuda": "12.8", "serial": PLANTED["serial"]},
            "stages": {s: {"status": "complete", "attempt": 1} for s in ("topology", "bandwidth", "burnin")},
            "stages_selected": ["topology", "bandwidth", "burnin"],
            "facts": {
                "topology": {"gpus": ["NVIDIA H100 80GB HBM3"] * 8, "links": LINKS, "box": "switched"},
                "alpha_beta": {"alpha_s": alpha_us * 1e-6, "beta_Bps": beta * 1e9, "source": "nccl-tests"},
                "baseline": {"step_time_s": 0.2 + 0.01 * n},
            },
        },
    )
    rows = [
        Row(stage="bandwidth", case="all_reduce", metric="busbw", value=v, unit="GB/s", size_bytes=s, world=8)
        for s, v in ((1 << 20, busbw / 4), (1 << 30, busbw * 0.97), (1 << 33, busbw))
    ]
    rows += [
        Row(stage="burnin", case="hbm", metric="copy_GBps", value=hbm, unit="GB/s", rank=r, world=8)
        for r in range(8)
    ]
    rows += [
        Row(
            stage="burnin",
            case="gemm",
            metric="tflops",
            value=gemm,
            unit="TFLOP/s",
            dtype="bfloat16",
            rank=r,
            world=8,
        )
        for r in range(8)
    ]
    run.write_rows_all(rows)
    run.write_verdicts_all(
        [
            Verdict(
                id="topology.gpus", stage="topology", status="pass", expected="8", observed="8", reason=""
            ),
            Verdict(
                id=f"health.token.{PLANTED['token']}",  # a credential that reached a verdict's id
                stage="health",
                status="fail" if n == 3 else "pass",
                expected="",
                observed=f"on {PLANTED['host']} ({PLANTED['address']})",
                reason="",
            ),
        ]
    )
    return run.path


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    """20 H100 runs: the demo's real captures ingested (indexed by `suite ingest` itself) and 19 synthetic."""
    base = tmp_path_factory.mktemp("lib")
    # with no CARDTIME_LIBRARY, the library beside the runs
    said = suite(
        "ingest",
        *DEMO,
        "--gpu-model",
        "NVIDIA H100 80GB HBM3",
        "--out",
        str(base / "runs"),
        CARDTIME_LIBRARY="",
    )
    lib = base / "runs" / "library.sqlite"
    assert said.returncode == 3 and f"library: indexed in {lib} (H100 SXM" in said.stderr, said.stderr[-2000:]
    runs = []
    for n in range(19):  # busbw 400…490, the others spread the same way
        runs.append(
            synthetic_run(base / "runs", n, 400 + 5 * n, 2500 + 20 * n, 650 + 4 * n, 30 - n, 300 + 5 * n)
        )
    with index.opened(lib) as db:
        for i, run in enumerate(runs):
            index.add(
                db,
                summarize(run, {"provider": "p", "price_per_hour": 20.0 + i}),
                origin="added",
                path=str(run),
            )
    return lib, runs


def test_a_run_among_19_others_gets_its_percentile_per_figure_and_its_nearest_box(library):
    lib, runs = library
    with index.opened(lib) as db:
        assert len(index.listed(db, gpu_model="H100 SXM")) == 20
        mine = summarize(runs[10], {"price_per_hour": 30.0})  # busbw 450, hbm 2700, gemm 690, α 20 µs, β 350
        lines = place.placement(db, mine)
    text = "\n".join(lines)
    # busbw: 10 synthetic below (400…445) and the real demo's 468.6 above, with 8 synthetic above: 10 of 19
    assert "all_reduce busbw 450 GB/s: percentile 53 among 19 other H100 SXM runs" in text, text
    assert "HBM copy 2,700 GB/s: percentile 56 among 18 other H100 SXM runs" in text, (
        text
    )  # no HBM in the demo
    assert "α 20 us: percentile 56 among 18" in text, text  # lower is better: 10 of 18 slower
    assert "nearest other box: " in text and "figures within" in text
    nearest = place.nearest(mine, [s for s in index.listed(sqlite_of(lib)) if s["key"] != mine["key"]])
    assert nearest[0]["figures"]["all_reduce.busbw"] in (445.0, 455.0)
    # $30/h over 8 × 690 TFLOP/s = 5.52 PFLOP/s
    assert "cost per measured bf16 PFLOP-hour: $5.43 ($30/h ÷ 5.52 PFLOP/s)" in text, text


def sqlite_of(lib: Path):
    import sqlite3

    db = sqlite3.connect(lib)
    db.row_factory = sqlite3.Row
    return db


def test_the_cli_lists_filters_and_places(library):
    lib, runs = library
    listed = suite("library", "--library", str(lib), "--gpu", "H100 SXM")
    assert listed.returncode == 0 and "20 run(s)" in listed.stdout, listed.stderr
    failed = suite("library", "--library", str(lib), "--verdict", "reject")
    assert failed.stdout.count("REJECT") == 1 and "1 run(s)" in failed.stdout  # run 3's failed check
    placed = subprocess.run(
        [sys.executable, "-m", "reports", "compare", "--library", str(lib), str(runs[18])],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert placed.returncode == 0 and "all_reduce busbw 490 GB/s: percentile 100 among 19" in placed.stdout


def test_plan_learns_alpha_beta_and_the_step_time_from_the_librarys_runs_of_the_model(library):
    lib, _ = library
    plain = json.loads(
        suite("plan", "--gpus", "8", "--library", str(lib.parent / "none.sqlite"), "--json").stdout
    )
    plan = json.loads(suite("plan", "--gpus", "8", "--library", str(lib), "--json").stdout)
    # the medians over the 19 synthetic 8-GPU runs: α 21 µs (30…12), β 345 GB/s (300…390), step 0.29 s
    assert plan["alpha_s"] == pytest.approx(21e-6) and plan["beta_Bps"] == pytest.approx(345e9)
    assert plan["learned_from_library"] == (
        f"from the library ({lib}), H100 SXM: α and β: medians of 19 earlier run(s); "
        "the one-card step time: median of 19"
    )
    baseline = {s["stage"]: s["seconds"] for s in plan["stages"]}["baseline"]
    assert baseline != {s["stage"]: s["seconds"] for s in plain["stages"]}["baseline"]
    assert plain["learned_from_library"] is None and plain["alpha_s"] == pytest.approx(5e-6)
    four = json.loads(suite("plan", "--gpus", "4", "--library", str(lib), "--json").stdout)
    assert four["alpha_s"] == pytest.approx(5e-6)  # no 4-GPU run: α and β stay the defaults
    assert four["learned_from_library"].endswith("H100 SXM: the one-card step time: median of 19")
    given = json.loads(
        suite("plan", "--gpus", "8", "--alpha", "7e-6", "--library", str(lib), "--json").stdout
    )
    assert given["alpha_s"] == pytest.approx(7e-6) and "α and β" not in given["learned_from_library"]


def test_a_shared_summary_holds_nothing_planted_and_round_trips_into_another_library(library, tmp_path):
    _, runs = library
    said = suite("share", str(runs[3]), "--out", str(tmp_path / "s.json"), "--provider", "lambda")
    assert said.returncode == 0, said.stderr
    text = (tmp_path / "s.json").read_text()
    for kind, planted in PLANTED.items():
        assert planted not in text, f"the planted {kind} is in the shared summary"
    shared = json.loads(text)
    assert shared["schema"] == SCHEMA and problem(shared) is None
    assert shared["labels"] == {"provider": "lambda"} and shared["box_verdict"] == "REJECT"
    assert shared["figures"]["all_reduce.busbw"] == 415.0 and shared["gpu_count"] == 8
    other = tmp_path / "other" / "library.sqlite"  # another checkout's library
    imported = suite("library", "import", str(tmp_path / "s.json"), "--library", str(other))
    assert imported.returncode == 0 and "imported" in imported.stdout, imported.stdout + imported.stderr
    with index.opened(other) as db:
        (back,) = index.listed(db)
    assert {k: back[k] for k in shared} == shared


def test_damaged_foreign_and_duplicate_summaries_are_refused_in_one_line_each(library, tmp_path):
    _, runs = library
    good = share(runs[5], tmp_path / "good.json")
    summary = json.loads(good.read_text())
    tampered = {**summary, "figures": {**summary["figures"], "all_reduce.busbw": 999.0}}
    (tmp_path / "tampered.json").write_text(json.dumps(tampered))
    foreign = {**summary, "schema": "someone.else/3"}
    foreign["digest"] = digest(foreign)
    (tmp_path / "foreign.json").write_text(json.dumps(foreign))
    (tmp_path / "damaged.json").write_text(good.read_text()[:40])
    lib = tmp_path / "library.sqlite"
    names = ["good", "good", "tampered", "foreign", "damaged"]
    got = import_files(lib, [tmp_path / f"{n}.json" for n in names])
    why = [w for _, w in got]
    assert why[0] is None
    assert why[1].startswith("already in the library")
    assert why[2] == "its digest does not match its content: changed after it was written"
    assert why[3].startswith("schema 'someone.else/3', not 'cardtime.summary/1'")
    assert why[4].startswith("not readable as JSON")
    cli = suite("library", "import", str(tmp_path / "tampered.json"), "--library", str(lib))
    assert cli.returncode == 1 and cli.stdout.count("\n") == 1 and "refused" in cli.stdout


def test_the_first_screen_gives_the_librarys_median_beside_the_public_figure(library, monkeypatch):
    from reports.report import render_path, standing_lines

    _, runs = library
    monkeypatch.delenv("CARDTIME_LIBRARY")  # the library beside the runs
    _, view = render_path(runs[10])
    line, hbm, gemm = standing_lines(view)
    assert line.startswith("all_reduce busbw 450.0 GB/s at 8 GiB = 94 % of the best public 8×H100 SXM figure")
    # the 19 others: 18 synthetic (400…490 but 450) and the demo's 468.6: the 10th is 445
    assert line.endswith("; your 19 other H100 SXM boxes in the library: median 445.0 GB/s")
    assert hbm.startswith(
        "HBM copy 2,700.0 GB/s (median of 8 GPUs) = 91 % of the best public H100 SXM figure"
    )
    assert gemm.endswith("your 18 other H100 SXM boxes in the library: median 684.0 TFLOP/s")
    assert line in (runs[10] / "report.html").read_text()


def test_indexing_a_run_again_keeps_the_labels_it_was_given(library, tmp_path):
    _, runs = library
    lib = tmp_path / "library.sqlite"
    with index.opened(lib) as db:
        index.add(db, summarize(runs[0], {"provider": "lambda", "price_per_hour": 24.0}), origin="added")
        index.add(db, summarize(runs[0], {"region": "us-east-1"}), origin="fetched")  # fetched again later
        (entry,) = index.listed(db)
    assert entry["labels"] == {"provider": "lambda", "price_per_hour": 24.0, "region": "us-east-1"}
    held = {k: v for k, v in entry.items() if k not in ("origin", "path")}  # listed() adds where it came from
    assert problem(held) is None  # its digest is of what it holds now
