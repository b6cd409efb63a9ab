"""The cp and ep drills on real gloo ranks: each golden comparison passes for the correct implementation
and catches every deliberate mistake by ≥ 10× its tolerance (one launch per stage serves every assertion).

Mistakes injected:
  cp  lse_average (ring partials averaged instead of LSE-weighted), mask_offset (the causal mask of every
      ring block built from positions counted from 0), a2a_transpose (Ulysses' return all-to-all splits
      the sequence as [S/P, P] instead of [P, S/P])
  ep  splits_not_exchanged (receivers assume they get what they send), combine_forward_splits (the
      combine reuses the dispatch's splits), router_unsynchronised (router seeded with seed + rank)
"""

from __future__ import annotations

import dataclasses
import json

import pytest

from suite.config import GLOO_CPU
from suite.launch.torchrun import run_torchrun
from suite.stages import cp as cp_stage
from suite.stages import ep as ep_stage

pytestmark = [pytest.mark.dist, pytest.mark.timeout(600)]

CP = GLOO_CPU.section("cp")
EP = GLOO_CPU.section("ep")
FACTS = {"profile": GLOO_CPU.to_dict()}
CP_MISTAKES = ("lse_average", "mask_offset", "a2a_transpose")
EP_MISTAKES = ("splits_not_exchanged", "combine_forward_splits", "router_unsynchronised")


def launch(tmp_path_factory, module, args):
    raw = tmp_path_factory.mktemp(module.rsplit(".", 1)[1])
    return run_torchrun(GLOO_CPU, module, args, raw_dir=raw, tag="t", nproc=4, timeout_s=500).rows()


@pytest.fixture(scope="module")
def cp_rows(tmp_path_factory):
    return launch(
        tmp_path_factory,
        "suite.stages.cp.worker",
        ["--cp", json.dumps(dataclasses.asdict(CP)), "--degrees", "2,4", "--mistakes", ",".join(CP_MISTAKES)],
    )


@pytest.fixture(scope="module")
def ep_rows(tmp_path_factory):
    return launch(
        tmp_path_factory,
        "suite.stages.ep.worker",
        ["--ep", json.dumps(dataclasses.asdict(EP)), "--mistakes", ",".join(EP_MISTAKES)],
    )


def errors(rows, prefix, **key):
    """{case without prefix: value} of max_abs_error rows whose case starts with prefix and match key."""
    return {
        r.case[len(prefix) :]: r.value
        for r in rows
        if r.metric == "max_abs_error"
        and r.case.startswith(prefix)
        and all(getattr(r, k) == v for k, v in key.items())
    }


# ---------------------------------------------------------------- cp


@pytest.mark.parametrize("algo", cp_stage.ALGOS)
@pytest.mark.parametrize("degree", [2, 4])
def test_cp_matches_full_attention(cp_rows, algo, degree):
    found = {
        c: v for c, v in errors(cp_rows, "", algo=algo, world=degree).items() if not c.startswith("mistake.")
    }
    assert set(found) == {f"{m}.{q}" for m in cp_stage.MASKS for q in cp_stage.QUANTITIES}
    tols = cp_stage.tolerances(CP, degree)
    assert all(v <= tols[c.split(".")[1]].bound for c, v in found.items()), found


@pytest.mark.parametrize(
    "mistake,masks",
    [
        ("lse_average", ("full", "causal")),
        ("mask_offset", ("causal",)),
        ("a2a_transpose", ("full", "causal")),
    ],
)
@pytest.mark.parametrize("degree", [2, 4])
def test_cp_comparison_catches_the_mistake(cp_rows, mistake, masks, degree):
    bound = cp_stage.tolerances(CP, degree)["lse"].bound  # the largest of the cp tolerances
    for mask in masks:
        found = errors(cp_rows, f"mistake.{mistake}.{mask}.", world=degree)
        assert set(found) == set(cp_stage.QUANTITIES), found
        assert max(found.values()) > 10 * bound, (mask, found)


def test_cp_verdicts_pass_on_the_real_rows_and_fail_on_a_mistake(cp_rows):
    verdicts = {v.id: v.status for v in cp_stage.judge(cp_rows, [], FACTS)}
    for d in (2, 4):
        for algo in cp_stage.ALGOS:
            assert verdicts[f"cp.golden.{algo}.cp{d}"] == "pass"
            assert verdicts[f"cp.comm_volume.{algo}.cp{d}"] == "pass"
        assert verdicts[f"cp.golden.torch_cp.cp{d}"] == "skip"
    # The same judge, handed the LSE-averaging run's numbers as the ring's own, fails it.
    swapped = [
        dataclasses.replace(r, case=r.case.removeprefix("mistake.lse_average."))
        for r in cp_rows
        if r.case.startswith("mistake.lse_average.") or not (r.metric == "max_abs_error" and r.algo == "ring")
    ]
    assert {v.id: v.status for v in cp_stage.judge(swapped, [], FACTS)}["cp.golden.ring.cp4"] == "fail"


def test_cp_bytes_sent_are_the_formula(cp_rows):
    sent = {(r.algo, r.world): r.value for r in cp_rows if r.metric == "bytes_sent"}
    assert len(sent) == 4
    assert all(v == cp_stage.forward_bytes(a, CP, d) > 0 for (a, d), v in sent.items()), sent


def test_cp_timing_rows(cp_rows):
    layer = {
        (r.algo, r.world, r.count): r.value for r in cp_rows if r.case == "layer" and r.metric == "time_s"
    }
    assert len(layer) == 2 * 2 * len(CP.seq_lens) and all(v > 0 for v in layer.values())
    hidden = [r.value for r in cp_rows if r.metric == "rotation_hidden"]
    assert len(hidden) == 2 * len(CP.seq_lens) and all(0 <= h <= 1 for h in hidden)


# ---------------------------------------------------------------- ep


@pytest.mark.parametrize("router", ep_stage.ROUTERS)
def test_ep_matches_single_process(ep_rows, router):
    found = errors(ep_rows, f"{router}.")
    assert set(found) == set(ep_stage.QUANTITIES)
    tols = ep_stage.tolerances(EP, 4)
    assert all(v <= tols[q].bound for q, v in found.items()), found
    value = {r.metric: r.value for r in ep_rows if r.case == router}
    assert value["assignments"] > 0 and value["token_set_mismatches"] == 0
    assert value["dropped"] == value["dropped_reference"]


def test_ep_capacity_drops_tokens_and_the_skewed_router_is_imbalanced(ep_rows):
    value = {(r.case, r.metric): r.value for r in ep_rows}
    assert value[("skewed", "dropped")] > value[("uniform", "dropped")] >= 0
    assert value[("skewed", "imbalance")] > value[("uniform", "imbalance")] >= 1
    kept = [v for (c, m), v in value.items() if c.startswith("uniform.expert") and m == "tokens_kept"]
    received = [v for (c, m), v in value.items() if c.startswith("uniform.rank") and m == "tokens_received"]
    assert (
        len(kept) == EP.experts
        and len(received) == 4
        and sum(kept) == sum(received) == value[("uniform", "assignments")]
    )


@pytest.mark.parametrize("mistake", EP_MISTAKES)
@pytest.mark.parametrize("router", ep_stage.ROUTERS)
def test_ep_comparison_catches_the_mistake(ep_rows, mistake, router):
    found = errors(ep_rows, f"mistake.{mistake}.{router}.")
    assert set(found) == set(ep_stage.QUANTITIES)
    bound = max(t.bound for t in ep_stage.tolerances(EP, 4).values())
    assert found["output"] > 10 * bound, found
    mismatches = {r.case: r.value for r in ep_rows if r.metric == "token_set_mismatches"}[
        f"mistake.{mistake}.{router}"
    ]
    # its dispatch is right, its combine is not
    assert (mismatches > 0) == (mistake != "combine_forward_splits")
    verdict = ep_stage.golden_verdict(
        ep_rows, router, ep_stage.tolerances(EP, 4), prefix=f"mistake.{mistake}."
    )
    assert verdict.status == "fail"


def test_ep_verdicts_and_timing_rows(ep_rows):
    verdicts = {v.id: v.status for v in ep_stage.judge(ep_rows, [], FACTS)}
    assert verdicts["ep.golden.uniform"] == verdicts["ep.golden.skewed"] == verdicts["ep.load"] == "pass"
    assert verdicts["ep.imbalance_cost"] == "skip"
    steps = {
        (r.case, r.algo): r.value for r in ep_rows if r.case.startswith("step.") and r.metric == "time_s"
    }
    assert len(steps) == 2 * len(EP.capacity_factors) and all(v > 0 for v in steps.values())
    bw = [r for r in ep_rows if r.case == "dispatch" and r.metric == "algbw"]
    assert len(bw) == 2 and all(r.value > 0 and r.size_bytes > 0 for r in bw)


# ---------------------------------------------------------------- figures, from the real rows


def test_figures_draw_from_the_real_rows(cp_rows, ep_rows):
    import pandas as pd
    from matplotlib.figure import Figure

    from suite.results import EXPECTATION_COLUMNS, ROW_COLUMNS
    from suite.stages.cp import figure as cp_figures
    from suite.stages.ep import figure as ep_figures

    for module, stage, rows in ((cp_figures, cp_stage, cp_rows), (ep_figures, ep_stage, ep_rows)):
        frame = pd.DataFrame([r.to_dict() for r in rows], columns=list(ROW_COLUMNS))
        expected = pd.DataFrame(
            [e.to_dict() for e in stage.expect(GLOO_CPU, {})], columns=list(EXPECTATION_COLUMNS)
        )
        figures = module.figures(frame, expected, FACTS)
        assert len(figures) == 2 and all(isinstance(f, Figure) for f in figures)
