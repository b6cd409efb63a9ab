"""The α-β model against every figure CHECKLIST.md quotes, to its printed precision."""

import math

import pytest

from suite.costmodel import alphabeta as ab

A, B = 5e-6, 200e9  # α = 5 µs, β = 200 GB/s
KB, MB, GB = 1024, 1024**2, 1024**3


@pytest.mark.parametrize(
    "fn, size, n, expected_us",
    [
        (ab.ring_allreduce_s, 4 * KB, 4, 30.0),
        (ab.tree_allreduce_s, 4 * KB, 4, 20.1),
        (ab.ring_allreduce_s, 4 * MB, 4, 61.5),
        (ab.tree_allreduce_s, 4 * MB, 4, 103.9),
        (ab.ring_allreduce_s, 1 * GB, 8, 9465.2),
    ],
)
def test_checklist_allreduce_figures(fn, size, n, expected_us):
    assert round(fn(size, n, A, B) * 1e6, 1) == expected_us


def test_checklist_7b_over_64_cards():
    grads = 14 * GB  # 7B parameters of bf16 gradients
    assert round(ab.ring_allreduce_s(grads, 64, A, B) * 1e3, 1) == 148.6
    # ZeRO-3: two all-gathers and one reduce-scatter, each half an all-reduce ≈ 1.5×
    assert ab.zero_step_comm_s(3, grads, 64, A, B) == pytest.approx(
        1.5 * ab.ring_allreduce_s(grads, 64, A, B)
    )


@pytest.mark.parametrize(
    "collective, n, factor",
    [
        ("all_reduce", 4, 1.5),
        ("all_reduce", 8, 1.75),
        ("all_gather", 8, 0.875),
        ("reduce_scatter", 4, 0.75),
        ("all_to_all", 4, 0.75),
        ("alltoall", 2, 0.5),
        ("broadcast", 8, 1.0),
        ("reduce", 8, 1.0),
        ("sendrecv", 2, 1.0),
    ],
)
def test_busbw_factors(collective, n, factor):
    assert ab.busbw_factor(collective, n) == factor


def test_busbw_from_time():
    # nccl-tests: 1 GB all-reduce in 10 ms on 8 ranks → algbw 100 GB/s, busbw 175 GB/s
    assert ab.algbw_GBps(1e9, 0.01) == pytest.approx(100.0)
    assert ab.busbw_GBps("all_reduce", 1e9, 0.01, 8) == pytest.approx(175.0)


def test_unknown_collective_is_refused():
    with pytest.raises(ValueError, match="unknown collective"):
        ab.busbw_factor("allreduce_magic", 4)


def test_crossover_is_where_ring_and_tree_meet():
    for n in (4, 5, 8, 16):
        s = ab.crossover_bytes(n, A, B)
        assert s is not None and s > 0
        assert ab.ring_allreduce_s(s, n, A, B) == pytest.approx(ab.tree_allreduce_s(s, n, A, B))
        assert ab.tree_allreduce_s(s / 2, n, A, B) < ab.ring_allreduce_s(
            s / 2, n, A, B
        )  # below it the tree wins
        assert ab.ring_allreduce_s(s * 2, n, A, B) < ab.tree_allreduce_s(s * 2, n, A, B)  # above it the ring
    assert ab.crossover_bytes(2, A, B) is None  # two ranks: the ring is never slower
    assert ab.crossover_bytes(3, A, B) is None  # three: both take 4 steps, the ring sends less


def test_fit_recovers_alpha_beta_from_exact_points():
    sizes = [2**k for k in range(3, 27)]
    for algo, fn in (("ring", ab.ring_allreduce_s), ("tree", ab.tree_allreduce_s)):
        times = [fn(s, 8, A, B) for s in sizes]
        fit = ab.fit_alpha_beta("all_reduce", 8, sizes, times, algo=algo)
        assert fit.alpha_s == pytest.approx(A, rel=1e-9)
        assert fit.beta_Bps == pytest.approx(B, rel=1e-9)
        assert fit.rms_rel_residual < 1e-9


def test_fit_reports_residual_of_noisy_points():
    sizes = [2**k for k in range(3, 24)]
    times = [ab.ring_allreduce_s(s, 4, A, B) * (1.1 if i % 2 else 0.9) for i, s in enumerate(sizes)]
    fit = ab.fit_alpha_beta("all_reduce", 4, sizes, times)
    assert 0.05 < fit.rms_rel_residual < 0.2
    assert fit.alpha_s == pytest.approx(A, rel=0.25)


def test_fit_needs_two_sizes():
    with pytest.raises(ValueError):
        ab.fit_alpha_beta("all_reduce", 4, [8], [1e-5])


def test_zero_memory_falls_with_stage():
    psi, n = 1_000_000, 8
    mem = [ab.zero_memory_bytes(psi, n, s) for s in range(4)]
    assert mem[0] == 16 * psi
    assert mem[3] == 16 * psi / n
    assert mem == sorted(mem, reverse=True)


def test_dp_share():
    share = ab.dp_comm_share(14 * GB, 64, 1.0, A, B)
    comm = ab.ring_allreduce_s(14 * GB, 64, A, B)
    assert share == pytest.approx(comm / (1.0 + comm))
    assert math.isclose(ab.dp_step_comm_s(0, 1, A, B), 0.0)
