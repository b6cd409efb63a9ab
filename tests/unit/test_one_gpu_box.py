"""One GPU (the one-H200 box this project is lent, a `nccl-1gpu` run): the checks that need a second GPU are
not applicable — said so, and never what holds the box verdict open — while a rank that went missing on a
larger box still leaves them open."""

from __future__ import annotations

from suite.box_verdict import ACCEPT, INCONCLUSIVE, box_verdict
from suite.results import Row
from suite.stages.bandwidth import judge_fit
from suite.stages.burnin import rules
from suite.verdicts import NOT_APPLICABLE

GPU_RUN = {"profile": {"device": "cuda", "judge_performance": True}}


def gemm(world: int, *tflops: float) -> list[Row]:
    return [
        Row(
            stage="burnin",
            case="gemm",
            metric="tflops",
            unit="TFLOP/s",
            dtype="bfloat16",
            value=v,
            rank=r,
            world=world,
        )
        for r, v in enumerate(tflops)
    ]


def test_one_gpu_has_no_peers_and_no_fit_and_that_leaves_nothing_open():
    peers = rules.peer_verdict(gemm(1, 700.0), "bfloat16", on_gpu=True)
    one_rank = [
        Row(
            stage="bandwidth",
            case="all_reduce",
            metric="time_us",
            unit="us",
            value=v,
            size_bytes=s,
            world=1,
            source="torch",
        )
        for s, v in ((1 << 20, 9.0), (1 << 24, 80.0))
    ]
    fit = judge_fit(one_rank)
    for v in (peers, fit):
        assert v.status == "skip" and v.reason.startswith(NOT_APPLICABLE), v
    assert box_verdict(GPU_RUN, [peers, fit]).word == ACCEPT


def test_a_rank_missing_on_a_larger_box_stays_open():
    # seven of eight ranks reported nothing
    peers = rules.peer_verdict(gemm(8, 700.0), "bfloat16", on_gpu=True)
    assert peers.status == "skip" and not peers.reason.startswith(NOT_APPLICABLE)
    assert box_verdict(GPU_RUN, [peers]).word == INCONCLUSIVE
