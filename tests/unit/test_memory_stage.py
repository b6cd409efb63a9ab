"""The memory stage on CPU: MemTracker's accounting against the formula, the OOM search under a real cap,
and each check shown able to fail (a wrong formula, a leaked tensor)."""

from __future__ import annotations

import dataclasses

import pandas as pd
import pytest
import torch
from matplotlib.figure import Figure

from suite.config import GLOO_CPU
from suite.costmodel.memory_formula import activation_bytes_per_layer, korthikanti_bytes_per_layer
from suite.stages import memory as stage
from suite.stages.memory import figure
from suite.stages.memory.search import CpuCap, largest_batch
from suite.stages.memory.worker import forward_loss, memory_rows, search_rows
from suite.workloads.gpt import build_model, synthetic_batch
from tests.factories import by_id

MC = GLOO_CPU.section("memory")
FACTS = {"profile": GLOO_CPU.to_dict()}


@pytest.fixture(scope="module")
def rows():
    torch.set_num_threads(1)
    return memory_rows(MC, torch.device("cpu"))


def test_every_term_matches_the_formula(rows):
    verdicts = by_id(stage.judge(rows, stage.expect(GLOO_CPU, {}), FACTS))
    assert len(verdicts) == 10
    assert verdicts.pop("memory.fragmentation").status == "skip"
    assert {v.status for v in verdicts.values()} == {"pass"}, [
        v for v in verdicts.values() if v.status != "pass"
    ]
    per_layer = next(r.value for r in rows if r.case == "activations" and r.metric == "bytes_per_layer")
    assert per_layer == activation_bytes_per_layer(MC.seq_len, MC.batch, MC.hidden, MC.heads)  # exact on CPU


def test_a_wrong_memory_formula_is_caught(rows):
    """Korthikanti's formula (another block) and a state priced at 12Ψ are both refused against the
    measurement."""
    s, b, h, a = MC.seq_len, MC.batch, MC.hidden, MC.heads
    wrong = [
        dataclasses.replace(e, value=korthikanti_bytes_per_layer(s, b, h, a))
        if (e.case, e.metric) == ("activations", "bytes_per_layer")
        else dataclasses.replace(e, value=e.value / 2)
        if (e.case, e.metric) == ("state", "optimizer")
        else e
        for e in stage.expect(GLOO_CPU, {})
    ]
    verdicts = by_id(stage.judge(rows, wrong, FACTS))
    assert verdicts["memory.activations.per_layer"].status == "fail"
    assert verdicts["memory.state.optimizer"].status == "fail"
    assert verdicts["memory.state.parameters"].status == "pass"


def test_the_search_finds_the_threshold_under_a_cap(rows):
    largest = next(r.value for r in rows if r.metric == "largest_batch")
    oom = next(r.value for r in rows if r.metric == "smallest_oom")
    fits = [r for r in rows if r.metric == "try_fits"]
    assert len(fits) >= 4 and largest >= 2 and oom == largest + 1
    assert any(r.value == 0 for r in fits), "the cap never bit: no OutOfMemoryError was recovered from"


def test_a_search_that_never_hits_the_cap_or_strays_from_linear_is_flagged(rows):
    def replaced(metric, value):
        return [
            dataclasses.replace(r, value=value) if (r.case, r.metric) == ("search", metric) else r
            for r in rows
        ]

    largest = next(r.value for r in rows if r.metric == "largest_batch")
    unconverged = by_id(stage.search_verdicts(replaced("smallest_oom", float("nan")), MC, FACTS))
    assert unconverged["memory.search.threshold"].status == "fail"
    strayed = by_id(stage.search_verdicts(replaced("predicted_batch", 3 * largest), MC, FACTS))
    assert (
        strayed["memory.search.linear"].status == "warn"
        and strayed["memory.search.threshold"].status == "pass"
    )


def test_a_tensor_leaked_by_a_step_is_caught():
    kept = []
    leaky = search_rows(MC, torch.device("cpu"), step_hook=kept.append)  # keeps every loss and its graph
    assert kept
    verdict = by_id(stage.search_verdicts(leaky, MC, FACTS))["memory.search.no_leak"]
    assert verdict.status == "fail" and "kept" in verdict.observed


def test_a_saved_exception_leaks_only_the_failed_tries():
    """The classic bug: keeping the OutOfMemoryError (its traceback holds the failed step's tensors)."""
    cfg = MC.model(layers=1)
    saved = []
    with CpuCap() as cap:
        model = build_model(cfg)
        cap.cap_bytes = cap.allocated() + 2**20

        def step(batch):
            try:
                forward_loss(model, *synthetic_batch(cfg, 0, batch=batch)).backward()
            except torch.OutOfMemoryError as e:
                saved.append(e)
                raise
            model.zero_grad(set_to_none=True)

        result = largest_batch(step, cap, max_batch=256)
    assert saved and result.smallest_oom is not None
    leaks = {t.fits: [] for t in result.tries}
    for t in result.tries:
        leaks[t.fits].append(t.leaked_bytes)
    assert all(x == 0 for x in leaks[True]) and any(x > 0 for x in leaks[False])


def test_the_figure(rows):
    frame = pd.DataFrame([r.to_dict() for r in rows])
    exp = pd.DataFrame([e.to_dict() for e in stage.expect(GLOO_CPU, {})])
    figs = figure.figures(frame, exp, FACTS)
    assert len(figs) == 1 and isinstance(figs[0], Figure)
