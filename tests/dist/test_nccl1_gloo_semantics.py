"""The nccl1gpu stage's gloo_cuda case run on CPU tensors (`--device cpu`): one 2-rank gloo launch checks the
worker's collectives — their results elementwise against a single-process computation of every rank's
input — and that the stage's verdicts pass on them. On a card the same code compares CUDA with CPU."""

from __future__ import annotations

import json

import pytest
import torch

from suite.config import GLOO_CPU
from suite.launch.torchrun import run_torchrun
from suite.stages import nccl1gpu

pytestmark = pytest.mark.dist
WORLD = 2


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    raw = tmp_path_factory.mktemp("nccl1")
    return run_torchrun(
        GLOO_CPU,
        "suite.stages.nccl1gpu.worker",
        ["--case", "gloo_cuda", "--device", "cpu"],
        raw_dir=raw,
        nproc=WORLD,
        tag="gloo_cuda",
        timeout_s=240,
    ).rows()


def expected(name: str, rank: int) -> torch.Tensor:
    bases = [torch.arange(4 * WORLD, dtype=torch.float32) + 100 * r for r in range(WORLD)]
    total = torch.stack(bases).sum(0)
    return {
        "all_reduce_sum": total,
        "all_reduce_max": torch.stack(bases).max(0).values,
        "broadcast": bases[WORLD - 1],
        "reduce": total if rank == 0 else torch.zeros_like(total),
        "all_gather": torch.cat(bases),
        "all_gather_into_tensor": torch.cat(bases),
        "reduce_scatter_tensor": total.chunk(WORLD)[rank],
        "all_to_all_single": torch.cat([bases[src].chunk(WORLD)[rank] for src in range(WORLD)]),
    }[name]


def test_every_collective_equals_the_single_process_result(rows):
    results = [r for r in rows if r.metric == "result"]
    assert len(results) == 8 * WORLD
    for r in results:
        got = torch.tensor(json.loads(r.text))
        assert torch.equal(got, expected(r.case, r.rank)), (r.case, r.rank, got)


def test_the_stage_verdicts_pass_on_the_launch(rows):
    verdicts = nccl1gpu.gloo_cuda_verdicts(rows)
    assert len(verdicts) == 8 and {v.status for v in verdicts} == {"pass"}
