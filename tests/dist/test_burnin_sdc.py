"""The burn-in's workers on 4 gloo ranks, one launch: rank 2's bf16 result gets one bit flipped at repeat 3
and rank 1 runs its chain 3× a repeat. The comparison must name rank 2, repeat 3 and the flipped element (as
GPU 2 under the GPU rule); everything else (every fp32 repeat on every rank, every other rank's bf16) must be
bit-identical, which is the determinism the stage relies on, holding on CPU; the peer rule must name rank 1
from the CPU figures."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from suite.config import GLOO_CPU
from suite.launch.forklaunch import launch
from suite.stages import burnin
from suite.stages.burnin import chain, rules

pytestmark = pytest.mark.dist
N, LINKS, FLAT, BIT = 96, 3, 1234, 7
FLIP = f"2:3:bfloat16:{FLAT}:{BIT}"


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    cfg = dataclasses.replace(
        GLOO_CPU.section("burnin"), seconds=2.0, n=N, links=LINKS, flip=FLIP, slow_rank=1
    )
    result = launch(
        GLOO_CPU,
        "suite.stages.burnin.worker",
        burnin.worker_args(cfg),
        raw_dir=tmp_path_factory.mktemp("burnin"),
        nproc=4,
        tag="burnin",
        timeout_s=300,
    )
    return result.rows()


def facts(on_gpu: bool) -> dict:
    return {"profile": {**GLOO_CPU.to_dict(), "judge_performance": on_gpu}}


def test_every_rank_ran_both_dtypes_in_step(rows):
    for dtype in burnin.DTYPES:
        repeats = rules.values(rows, "gemm", "repeats", dtype)
        assert sorted(repeats) == [0, 1, 2, 3], (dtype, repeats)
        # lockstep, past the flip
        assert len(set(repeats.values())) == 1 and min(repeats.values()) > 4, repeats


def test_the_flip_is_named_with_rank_repeat_and_element(rows):
    found = [r for r in rows if r.metric == "first_difference"]
    assert {(r.case, r.rank, r.repeat, r.dtype) for r in found} == {
        ("sdc_ranks", 2, 3, "bfloat16"),
        ("sdc_repeats", 2, 3, "bfloat16"),
    }
    assert all(int(r.value) == FLAT for r in found)
    row, col = divmod(FLAT, N)
    assert all(
        f"element [{row}, {col}] (flat {FLAT})" in r.text and f"xor 0x{1 << BIT:04x}" in r.text for r in found
    )
    assert "of rank 0 (the majority: 3 of 4 ranks)" in next(r.text for r in found if r.case == "sdc_ranks")


def test_the_flipped_element_is_the_only_difference_from_a_single_process_reference(rows):
    a, bs = chain.chain_inputs(N, LINKS, burnin.BurninConfig().seed, torch.bfloat16, torch.device("cpu"))
    reference = chain.run_chain(a, bs)
    flipped = reference.clone()
    chain.flip_bit(flipped, FLAT, BIT)
    assert chain.first_difference(flipped, reference)[0] == FLAT
    assert int((chain.bits(flipped) != chain.bits(reference)).sum()) == 1
    assert not torch.equal(chain.digest(flipped), chain.digest(reference))


def test_verdicts_fail_naming_the_gpu_repeat_and_element(rows):
    for on_gpu, name in ((False, "rank 2 at repeat 3"), (True, "GPU 2 (rank 2, cpu) at repeat 3")):
        verdicts = {v.id: v for v in burnin.judge(rows, [], facts(on_gpu))}
        bad = verdicts["burnin.sdc.bfloat16"]
        assert bad.status == "fail" and name in bad.observed and f"flat {FLAT}" in bad.observed, bad.observed
        assert verdicts["burnin.sdc.float32"].status == "pass", verdicts["burnin.sdc.float32"].observed


def test_the_peer_rule_names_the_slow_rank_from_cpu_figures(rows):
    tflops = rules.values(rows, "gemm", "tflops", "bfloat16")
    slowest, short, _ = rules.peer_shortfall(tflops)
    assert slowest == 1 and short > rules.PEER_FAIL, tflops
    on_cpu = {v.id: v for v in burnin.judge(rows, [], facts(False))}["burnin.peers.bfloat16"]
    assert (
        on_cpu.status == "skip" and "rank 1 " in on_cpu.observed and "the rule says fail" in on_cpu.observed
    )
    on_gpu = rules.peer_verdict(rows, "bfloat16", on_gpu=True)
    assert on_gpu.status == "fail" and "GPU 1 (rank 1" in on_gpu.observed


def test_windows_carry_their_time(rows):
    windows = [r for r in rows if r.case == "window" and r.rank == 0 and r.dtype == "bfloat16"]
    assert len(windows) >= 3 and all(r.t is not None and r.value > 0 for r in windows)
    assert [r.t for r in windows] == sorted(r.t for r in windows)


def test_links_measured_on_every_rank_and_judged_by_peers(rows):
    for case, metric, _ in rules.LINKS:
        per_rank = {r.rank: r.value for r in rows if r.case == case and r.metric == metric}
        assert sorted(per_rank) == [0, 1, 2, 3] and all(v > 0 for v in per_rank.values()), (case, metric)
    on_cpu = [v for v in burnin.judge(rows, [], facts(False)) if v.id.startswith("burnin.links.")]
    # + the HBM SKU check
    assert len(on_cpu) == len(rules.LINKS) + 1 and all(v.status == "skip" for v in on_cpu)
    assert "burnin.links.hbm.sku" in {v.id for v in on_cpu}
    made_slow = [
        r if not (r.case == "hbm" and r.rank == 3) else dataclasses.replace(r, value=r.value * 0.1)
        for r in rows
    ]
    on_gpu = {v.id: v for v in rules.link_verdicts(made_slow, on_gpu=True)}
    assert (
        on_gpu["burnin.links.hbm.copy"].status == "fail"
        and "GPU 3 (rank 3" in on_gpu["burnin.links.hbm.copy"].observed
    )
