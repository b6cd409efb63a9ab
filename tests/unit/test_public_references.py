"""Where a box stands against the best published figures (suite/hardware/public_references.toml): every
figure has its source and a model the GPU table knows; the demo's real 8×H100 all_reduce_perf capture,
ingested as `make demo` does, is shown as a share of the 8×H100 figure; per-GPU figures are read as the
median over the box's GPUs; a model with no published figure says so."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from reports.runview import load_run
from suite.hardware import gpus, public_references
from suite.results import Row

REPO = Path(__file__).resolve().parents[2]
DEMO = [
    "tests/data/topo/30-h100-8gpu-nv18-8nic-env-dump.txt",
    "tests/data/nccl-tests/21-h100-all_reduce-8gpu-mpirun-tag-output.txt",
]


def test_every_figure_has_a_source_a_known_model_and_a_reader():
    refs = public_references.references()
    assert len(refs) >= 5
    models = {g.model for g in gpus.GPUS}
    for r in refs:
        assert r.source.strip() and r.quoted.strip() and r.how.strip(), r
        assert r.gpu in models, r.gpu
        assert r.metric in public_references.READERS and r.value > 0, r
        assert r.range is None or (r.range[0] <= r.value == r.range[1]), r  # a range's top is the best
    keys = [(r.gpu, r.gpus, r.metric) for r in refs]
    assert len(keys) == len(set(keys)), "one best figure per model, layout and metric"


def test_a_damaged_references_file_names_its_entry(tmp_path, monkeypatch):
    bad = tmp_path / "refs.toml"
    bad.write_text('[[reference]]\ngpu = "H100 SXM"\ngpus = 8\nmetric = "all_reduce.busbw"\nvalue = 1.0\n')
    monkeypatch.setattr(public_references, "REFERENCES", bad)
    public_references.references.cache_clear()
    try:
        with pytest.raises(ValueError, match=r"reference 1: unknown \[\], missing \['how', 'quoted'"):
            public_references.references()
    finally:
        public_references.references.cache_clear()


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo")
    said = subprocess.run(
        [
            sys.executable,
            "-m",
            "suite",
            "ingest",
            *DEMO,
            "--gpu-model",
            "NVIDIA H100 80GB HBM3",
            "--out",
            str(out),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert said.returncode == 3, said.stderr[-2000:]  # INCONCLUSIVE: no health capture, as make demo
    (run,) = [p for p in out.iterdir() if p.is_dir()]
    return said.stderr, load_run(run)


def test_the_demo_shows_its_all_reduce_as_a_share_of_the_8xh100_figure(demo_run):
    stderr, view = demo_run
    (s,) = public_references.standing(view.facts, view.rows)
    # the capture's best bus bandwidth at ≥ 1 GiB: 468.62 GB/s at 2 GiB (its last size)
    assert s.measured.value == pytest.approx(468.62) and s.reference.value == 480.0
    assert s.line.startswith(
        "all_reduce busbw 468.6 GB/s at 2 GiB = 98 % of the best public 8×H100 SXM figure"
    )
    assert "NVIDIA/nccl-tests#212" in s.line
    assert f"stands: {s.line}" in stderr  # what `make demo` prints
    assert s.line in (view.path / "report.html").read_text()


def test_per_gpu_figures_are_the_median_over_the_boxs_gpus(demo_run):
    _, view = demo_run
    burnin = [
        Row(stage="burnin", case="hbm", metric="copy_GBps", value=v, unit="GB/s", rank=i, world=8)
        for i, v in enumerate([2800, 2810, 2790, 2805, 1400, 2795, 2800, 2802])
    ] + [
        Row(
            stage="burnin",
            case="gemm",
            metric="tflops",
            value=700.0 + i,
            unit="TFLOP/s",
            dtype=d,
            rank=i,
            world=8,
        )
        for i in range(8)
        for d in ("bfloat16", "float32")
    ]
    rows = pd.concat([view.rows, pd.DataFrame([r.to_dict() for r in burnin])], ignore_index=True)
    got = {s.reference.metric: s for s in public_references.standing(view.facts, rows)}
    assert set(got) == {"all_reduce.busbw", "hbm.copy", "gemm.bf16"}
    assert got["hbm.copy"].measured.value == 2800.0  # one slow GPU does not move the median
    assert got["hbm.copy"].line.startswith(
        "HBM copy 2,800.0 GB/s (median of 8 GPUs) = 95 % of the best public H100"
    )
    assert got["gemm.bf16"].measured.value == 703.5  # bf16 only: float32 rows are not this figure


def test_a_model_without_a_published_figure_says_so_and_a_cpu_run_says_nothing(demo_run):
    _, view = demo_run
    a100 = {**view.facts, "topology": {**view.facts["topology"], "gpu_model": "NVIDIA A100-SXM4-80GB"}}
    assert public_references.standing(a100, view.rows) == []
    assert public_references.no_reference_line(a100) == (
        "no public reference figure for A100 SXM in suite/hardware/public_references.toml"
    )
    # the figure is still shown, saying it has no public one beside it
    assert public_references.unreferenced(a100, view.rows) == [
        (
            "all_reduce.busbw",
            "all_reduce busbw 468.6 GB/s at 2 GiB: no public figure for 8×A100 SXM in public_references.toml",
        )
    ]
    assert public_references.no_reference_line({}) is None and public_references.standing({}, view.rows) == []
