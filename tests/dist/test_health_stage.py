"""The health stage's measurements on 4 gloo ranks with rank 2 made slow on purpose (4× the work for the same
count): one launch. The outlier rule must name rank 2 in every metric, as a warning on CPU ranks and as a
failure naming GPU 2 under the GPU rule; the rehearsal's own run of the stage (no slow rank) is
tests/e2e/test_rehearsal.py's."""

from __future__ import annotations

import statistics

import pytest

from suite.config import GLOO_CPU
from suite.launch.torchrun import run_torchrun
from suite.stages import health
from suite.stages.health import rules

pytestmark = pytest.mark.dist
METRICS = ("gemm_tflops", "h2d_GBps", "d2h_GBps")


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    cfg = GLOO_CPU.section("health")
    args = [
        "--gemm-n",
        str(cfg.gemm_n),
        "--gemm-iters",
        str(cfg.gemm_iters),
        "--copy-bytes",
        str(cfg.copy_mib << 20),
        "--copy-iters",
        str(cfg.copy_iters),
        "--slow-rank",
        "2",
    ]
    result = run_torchrun(
        GLOO_CPU,
        "suite.workloads.health_run",
        args,
        raw_dir=tmp_path_factory.mktemp("health"),
        nproc=4,
        tag="measure",
        timeout_s=300,
    )
    return result.rows()


def per_rank(rows, metric):
    return {int(r.rank): r.value for r in rows if r.metric == metric}


def test_every_rank_measured_every_metric(rows):
    assert len(rows) == 12
    for metric in METRICS:
        values = per_rank(rows, metric)
        assert sorted(values) == [0, 1, 2, 3] and all(v > 0 for v in values.values()), (metric, values)
    assert {r.unit for r in rows if r.metric == "gemm_tflops"} == {"TFLOP/s"}


def test_the_injected_slow_rank_is_far_below_its_peers(rows):
    for metric in METRICS:
        values = per_rank(rows, metric)
        peers = statistics.median(v for r, v in values.items() if r != 2)
        assert values[2] < 0.6 * peers, (metric, values)


def test_the_outlier_rule_names_the_slow_rank(rows):
    facts = {
        "profile": GLOO_CPU.to_dict(),
        "health": {"kernel_log": None, "kernel_log_why": "not read here", "network": None},
    }
    verdicts = {v.id: v for v in health.judge(rows, [], facts)}
    for metric in METRICS:
        v = verdicts[f"health.measured.{metric}"]
        assert v.status == "skip" and "rank 2 " in v.reason, v.reason  # named, not judged: CPU ranks
    on_gpu = rules.measured_verdicts(
        {m: per_rank(rows, m) for m in METRICS}, on_gpu=True, gemm_peak_tflops=None, link_GBps={}
    )
    assert [v.status for v in on_gpu] == ["fail"] * 3
    assert all("GPU 2 " in v.reason and "reset the GPU" in v.reason for v in on_gpu)
