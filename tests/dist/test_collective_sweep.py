"""The torch collective sweep on 3 gloo ranks (not a power of two): nccl-tests' columns, every collective
checked, a corrupted element counted as wrong, and the cases over a memory budget dropped as rows; before
it, the primitive probe (as the bandwidth stage runs it), one primitive made to return a wrong value.
One launch serves every assertion."""

from __future__ import annotations

import pytest

from suite.config import GLOO_CPU
from suite.costmodel.alphabeta import busbw_factor
from suite.launch import forklaunch  # launch(): the profile's launcher, gloo-cpu's warm fork launcher
from suite.workloads.collective_sweep import COLLECTIVES

pytestmark = pytest.mark.dist

SIZES = [8, 96, 6144]
N = 3
PROBE_MISTAKE = "wrong.all_gather_into_tensor"
BUDGET = 10_000
"""Bytes one case may hold: 6144 B all_to_all and send/recv hold 2 × 6144 and are dropped; the rest fit."""


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    raw = tmp_path_factory.mktemp("sweep")
    result = forklaunch.launch(
        GLOO_CPU,
        "suite.workloads.collective_sweep",
        [
            "--sizes",
            ",".join(map(str, SIZES)),
            "--warmup",
            "1",
            "--iters",
            "2",
            "--inject-wrong",
            "all_to_all",
            "--bare-repeats",
            "1",
            "--memory-budget",
            str(BUDGET),
            "--probe",
            "--mistakes",
            PROBE_MISTAKE,
        ],
        raw_dir=raw,
        nproc=N,
        tag="sweep",
        timeout_s=300,
    )
    return result.rows()


def by(rows, **match):
    return [r for r in rows if all(getattr(r, k) == v for k, v in match.items())]


def test_every_collective_and_placement_is_measured(sweep):
    for name, coll in COLLECTIVES.items():
        for placement in coll.placements:
            got = by(sweep, case=name, placement=placement, metric="busbw", source="torch")
            assert got, (name, placement)
            assert all(r.world == N and r.dtype == "float32" for r in got)


def test_results_are_right_except_the_corrupted_one(sweep):
    checked = [r for r in by(sweep, metric="wrong") if not r.case.startswith("probe.")]
    # every collective is checked at some size (all_gather/all_to_all skip 8 B: fewer elements than ranks)
    assert {r.case for r in checked} == set(COLLECTIVES), sorted({r.case for r in checked})
    assert len(by(sweep, metric="wrong", case="all_to_all")) >= 1
    for r in checked:
        expected = 1 if r.case == "all_to_all" else 0
        assert r.value == expected, (r.case, r.size_bytes, r.placement, r.value)


def test_sizes_and_counts_follow_nccl_tests(sweep):
    ag = {r.size_bytes: r.count for r in by(sweep, case="all_gather", metric="time_us", placement="oop")}
    # 96 B of float32 over 3 ranks: 8 elements each, S = 96; 8 B cannot give each rank one element: skipped
    assert ag == {96: 8, 6144: 512}
    ar = {r.size_bytes: r.count for r in by(sweep, case="all_reduce", metric="time_us")}
    assert ar == {8: 2, 96: 24, 6144: 1536}
    assert {r.root for r in by(sweep, case="broadcast")} == {0}
    assert {r.redop for r in by(sweep, case="all_gather")} == {"none"}


def test_busbw_is_algbw_times_the_factor(sweep):
    measured = [r for r in by(sweep, metric="busbw", source="torch") if r.case in COLLECTIVES]
    assert {r.case for r in measured} == set(COLLECTIVES)
    for r in measured:
        algbw = by(sweep, case=r.case, metric="algbw", size_bytes=r.size_bytes, placement=r.placement)[
            0
        ].value
        time_us = by(sweep, case=r.case, metric="time_us", size_bytes=r.size_bytes, placement=r.placement)[
            0
        ].value
        assert algbw == pytest.approx(r.size_bytes / (time_us * 1e-6) / 1e9)
        assert r.value == pytest.approx(algbw * busbw_factor(r.case, N))


def test_harness_and_bare_loop_are_both_recorded(sweep):
    harness, bare = by(sweep, case="overhead.harness"), by(sweep, case="overhead.bare")
    assert len(harness) == len(bare) == 1
    assert harness[0].size_bytes == bare[0].size_bytes == max(SIZES)
    assert harness[0].value > 0 and bare[0].value > 0


def test_cases_over_the_memory_budget_become_rows_and_the_rest_still_runs(sweep):
    dropped = by(sweep, metric="dropped")
    assert sorted((r.case, r.size_bytes, r.value) for r in dropped) == [
        ("all_to_all", 6144, 12288.0),
        ("sendrecv", 6144, 12288.0),
    ]
    assert all(
        "holds 12288 B at once, over the 10000 B budget" in r.text and "not run" in r.text for r in dropped
    )
    assert not by(sweep, case="all_to_all", size_bytes=6144, metric="busbw")
    # smaller sizes of the same collective ran
    assert by(sweep, case="all_to_all", size_bytes=96, metric="busbw")
    assert by(sweep, case="all_gather", size_bytes=6144, placement="oop", metric="busbw")  # 8192 B fits


def test_the_probe_tries_every_primitive_on_every_rank_and_catches_the_wrong_one(sweep):
    from suite.stages import bandwidth
    from suite.stages._probe import PRIMITIVES, summarize

    probed = [r for r in sweep if r.case.startswith("probe.")]
    assert len(probed) == len(PRIMITIVES) * N  # every rank its own row per primitive
    assert {(r.case, r.rank) for r in probed} == {(f"probe.{p}", k) for p in PRIMITIVES for k in range(N)}
    wrong = {(r.case, r.rank): r.value for r in probed if r.value}
    # the injected element, on the last rank only
    assert wrong == {("probe.all_gather_into_tensor", N - 1): 1.0}
    results = {r.name: r for r in summarize(sweep)}
    assert results["all_gather_into_tensor"].status == "wrong"
    assert {r.status for name, r in results.items() if name != "all_gather_into_tensor"} == {"ok"}
    verdicts = {
        v.id: v.status
        for v in bandwidth.judge(sweep, [], {"profile": GLOO_CPU.to_dict()})
        if v.id.startswith("bandwidth.probe.")
    }
    assert len(verdicts) == len(PRIMITIVES)
    assert verdicts.pop("bandwidth.probe.all_gather_into_tensor") == "fail"
    assert set(verdicts.values()) == {"pass"}
