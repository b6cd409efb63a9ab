"""The TP plan's shape and its refusals (no process group needed: the plan is only a mapping)."""

from __future__ import annotations

import dataclasses

import pytest
from torch.distributed.tensor import Shard
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    PrepareModuleInput,
    RowwiseParallel,
    SequenceParallel,
)

from suite.config import GLOO_CPU
from suite.workloads.gpt import GPT
from suite.workloads.parallel_plans import _RowwiseWithoutReduction, tp_plan
from suite.workloads.training import seed_for_rank

CFG = GLOO_CPU.model


def test_sequence_parallel_plan_covers_every_linear_and_norm():
    plan = tp_plan(GPT(CFG))
    for i in range(CFG.layers):
        for name in ("attn.q", "attn.k", "attn.v", "mlp.up"):
            assert type(plan[f"blocks.{i}.{name}"]) is ColwiseParallel
        for name in ("attn.o", "mlp.down"):
            style = plan[f"blocks.{i}.{name}"]
            assert type(style) is RowwiseParallel and style.output_layouts == (Shard(1),)
        for name in ("attn_norm", "mlp_norm"):
            assert isinstance(plan[f"blocks.{i}.{name}"], SequenceParallel)
        assert isinstance(plan[f"blocks.{i}.attn"], PrepareModuleInput)
    assert plan["embed"].output_layouts == (Shard(1),)


def test_mistakes_change_exactly_what_they_name():
    assert plan_without_mistake_differs("wrong_dim") == {"embed"}
    changed = plan_without_mistake_differs("missing_reduction")
    assert changed == {f"blocks.{i}.{n}" for i in range(CFG.layers) for n in ("attn.o", "mlp.down")}
    assert isinstance(
        tp_plan(GPT(CFG), mistake="missing_reduction")["blocks.0.attn.o"], _RowwiseWithoutReduction
    )
    assert seed_for_rank(CFG, 3, "per_rank_seed").seed == CFG.seed + 3
    assert seed_for_rank(CFG, 3, None).seed == CFG.seed


def plan_without_mistake_differs(mistake):
    good, bad = tp_plan(GPT(CFG)), tp_plan(GPT(CFG), mistake=mistake)
    return {k for k in good if repr(good[k]) != repr(bad[k]) or type(good[k]) is not type(bad[k])}


def test_plan_refusals_name_the_fix():
    with pytest.raises(ValueError, match="unknown TP mistake"):
        tp_plan(GPT(CFG), mistake="typo")
    with pytest.raises(ValueError, match="tied_head=False"):
        tp_plan(GPT(dataclasses.replace(CFG, tied_head=True)))
    with pytest.raises(ValueError, match="sequence_parallel=True"):
        tp_plan(GPT(CFG), sequence_parallel=False, mistake="wrong_dim")
