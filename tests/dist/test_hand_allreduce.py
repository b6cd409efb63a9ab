"""The hand ring and tree all-reduce on 2, 3 and 4 gloo ranks: one launch per world size serves every check.

Each launch runs both algorithms at sizes whose element counts do not divide evenly among the ranks
(and some smaller than the world), then: results equal dist.all_reduce (checked in the workers) and
equal a single-process sum of every rank's input (checked here), and every rank's bytes equal the
formulas of suite/costmodel/alphabeta.py. The same launches run each deliberate mistake
(suite/stages/crossover/hand_allreduce.py MISTAKES: a wrong chunk offset, a missing reduce-scatter step, a
tree parent overwriting instead of adding) and the comparison with dist.all_reduce must catch it.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from suite.config import GLOO_CPU
from suite.costmodel.alphabeta import ring_allreduce_bytes, tree_allreduce_bytes
from suite.costmodel.tolerance import tolerance
from suite.launch import forklaunch  # launch(): the profile's launcher, gloo-cpu's warm fork launcher
from suite.stages.crossover import judge_correct
from suite.stages.crossover.hand_allreduce import MISTAKES, fill

pytestmark = pytest.mark.dist

# float32 counts: 1, 2, 3, 5, 13, 1025, 12288 — fewer than n, uneven, even for n = 2, 3, 4
SIZES = [4, 8, 12, 20, 52, 4100, 49152]
SEED = 99
# The check itself wants 0 wrong elements (integer inputs sum exactly); a mistake's largest difference must
# also exceed 10× the float32 tolerance of the golden comparisons, so it could not hide in rounding.
TOL = tolerance("float32")
CAUGHT_FROM = 52  # bytes: 13 float32 elements, at least one per rank for every n here


@pytest.fixture(scope="module", params=[2, 3, 4], ids=lambda n: f"{n}ranks")
def launch(request, tmp_path_factory):
    n = request.param
    raw = tmp_path_factory.mktemp(f"hand{n}")
    args = [
        "--sizes",
        ",".join(map(str, SIZES)),
        "--warmup",
        "1",
        "--iters",
        "2",
        "--library",
        "--save-results",
        "--seed",
        str(SEED),
        "--stage",
        "test",
        "--mistakes",
        ",".join(MISTAKES),
    ]
    result = forklaunch.launch(
        GLOO_CPU,
        "suite.stages.crossover.hand_allreduce",
        args,
        raw_dir=raw,
        nproc=n,
        tag="hand",
        timeout_s=300,
    )
    return n, result


def rows_of(result, case, metric):
    return [r for r in result.rows() if r.case == case and r.metric == metric]


@pytest.mark.parametrize("algo", ["ring", "tree"])
def test_equal_to_dist_all_reduce_at_every_size(launch, algo):
    n, result = launch
    wrong = {r.size_bytes: r.value for r in rows_of(result, algo, "wrong")}
    assert sorted(wrong) == SIZES
    assert all(v == 0 for v in wrong.values()), wrong
    diffs = {r.size_bytes: r.value for r in rows_of(result, algo, "max_abs_diff")}
    assert sorted(diffs) == SIZES and set(diffs.values()) == {0}, diffs
    worlds = [r.world for r in rows_of(result, algo, "time_us")]
    assert worlds == [n] * len(SIZES)


@pytest.mark.parametrize("algo", ["ring", "tree"])
def test_equal_to_a_single_process_sum(launch, algo):
    n, result = launch
    for size in SIZES:
        count = size // 4
        reference = sum(fill(count, r, torch.float32, torch.device("cpu"), SEED) for r in range(n))
        for rank in range(n):
            got = torch.load(result.out_dir / f"result.{algo}.{size}.rank{rank}.pt")
            assert torch.equal(got, reference), (algo, size, rank)


@pytest.mark.parametrize("algo, formula", [("ring", ring_allreduce_bytes), ("tree", tree_allreduce_bytes)])
def test_bytes_match_the_formulas(launch, algo, formula):
    n, result = launch
    sent = {(r.size_bytes, r.rank): r.value for r in rows_of(result, f"{algo}.bytes", "bytes_sent")}
    received = {(r.size_bytes, r.rank): r.value for r in rows_of(result, f"{algo}.bytes", "bytes_received")}
    assert len(sent) == len(SIZES) * n
    for (size, rank), value in sent.items():
        want_sent, want_received = formula(size // 4, n, 4, rank)
        assert (value, received[(size, rank)]) == (want_sent, want_received), (size, rank)
    # and the textbook totals where the buffer divides evenly: ring 2(n−1)·S/n per rank, tree 2(n−1)·S in all
    even = 49152
    per_rank = [sent[(even, r)] for r in range(n)]
    if algo == "ring":
        assert per_rank == [2 * (n - 1) * even / n] * n
    else:
        assert sum(per_rank) == 2 * (n - 1) * even


def test_dist_all_reduce_is_timed_alongside(launch):
    _, result = launch
    assert sorted(r.size_bytes for r in rows_of(result, "library", "time_us")) == SIZES


@pytest.mark.parametrize("mistake", list(MISTAKES))
def test_the_comparison_catches_each_mistake(launch, mistake):
    n, result = launch
    wrong = {r.size_bytes: r.value for r in rows_of(result, f"mistake.{mistake}", "wrong")}
    diff = {r.size_bytes: r.value for r in rows_of(result, f"mistake.{mistake}", "max_abs_diff")}
    assert sorted(wrong) == sorted(diff) == SIZES, (wrong, diff)
    caught = [s for s in SIZES if s >= CAUGHT_FROM]
    assert len(caught) == 3
    for size in caught:
        assert wrong[size] >= 1 and diff[size] > 10 * TOL, (mistake, n, size, wrong[size], diff[size])


@pytest.mark.parametrize("mistake", list(MISTAKES))
def test_the_stage_verdict_fails_on_each_mistake(launch, mistake):
    _, result = launch
    algo = MISTAKES[mistake]
    rows = [r for r in result.rows() if r.case != algo]
    assert judge_correct(rows, algo).status == "fail"  # no rows at all: failed, never passed
    as_if_real = rows + [dataclasses.replace(r, case=algo) for r in rows if r.case == f"mistake.{mistake}"]
    verdict = judge_correct(as_if_real, algo)
    assert verdict.status == "fail", verdict
    # the real rows beside the mistakes' still pass
    assert judge_correct(result.rows(), algo).status == "pass"
