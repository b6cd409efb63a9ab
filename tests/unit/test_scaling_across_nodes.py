"""dp and zero on a multi-node profile (issue 14): the whole-node degrees, the α-β each degree is held to (the
intra-node fit within node 0, the inter-node fit across nodes, each falling back when absent), the cross-node
all-reduce against CHECKLIST.md's ring, the verdicts, headlines and figures naming the degrees that
crossed."""

from __future__ import annotations

import pandas as pd
import pytest

from reports.figures import stage_figures
from suite.config import GLOO_CPU, NCCL_GPU, ProfileError, get_profile, scaling_degrees
from suite.costmodel.alphabeta import allreduce_across_nodes_s, nodes_spanned, ring_allreduce_s
from suite.costmodel.scaling_expectations import dp_efficiency
from suite.facts import alpha_beta, alpha_beta_at
from suite.results import Expectation, Row, rows_to_frame
from suite.stages import dp, zero
from suite.workloads.node_ranks import nodes_rows
from tests.factories import by_id

TWO_BY_EIGHT = NCCL_GPU.with_overrides(nodes=("gpu-a", "gpu-b"))
TWO_BY_TWO = get_profile("gloo-cpu", 2).with_overrides(nodes=("node-a", "node-b"))
INTRA = {
    "alpha_s": 4e-6,
    "beta_Bps": 400e9,
    "rms_rel_residual": 0.03,
    "source": "nccl-tests",
    "world": 8,
    "points": 20,
}
INTER = {
    "alpha_s": 12e-6,
    "beta_Bps": 45e9,
    "rms_rel_residual": 0.04,
    "source": "nccl-tests",
    "world": 16,
    "points": 20,
}

# ---------------------------------------------------------------- the degrees (suite/config.py)


def test_whole_node_degrees_only_on_a_multi_node_profile():
    assert NCCL_GPU.dp_degrees == NCCL_GPU.degrees == (1, 2, 4, 8) and NCCL_GPU.cross_node_degrees == ()
    assert NCCL_GPU.zero_degrees == (8,) and NCCL_GPU.dp_model is NCCL_GPU.model
    assert TWO_BY_EIGHT.dp_degrees == (1, 2, 4, 8, 16) and TWO_BY_EIGHT.zero_degrees == (8, 16)
    assert TWO_BY_TWO.dp_degrees == (1, 2, 4) and TWO_BY_TWO.zero_degrees == (2, 4)
    assert scaling_degrees((1, 2, 4, 8), 8, 4) == (1, 2, 4, 8, 16, 32)
    assert scaling_degrees((1, 2, 4, 8), 8, 3) == (1, 2, 4, 8, 16, 24)
    # DP = 16 splits a batch of 8 no more: dp and zero train 16 sequences; the profile's own model is kept.
    assert TWO_BY_EIGHT.dp_model.batch == 16 and TWO_BY_EIGHT.model.batch == 8
    assert TWO_BY_TWO.dp_model == TWO_BY_TWO.model  # 8 sequences over 4 ranks: as it is


def test_degrees_above_nproc_stay_refused_and_say_more_across_nodes():
    with pytest.raises(
        ProfileError,
        match=r"^degrees \[8\] exceed nproc 4: lower --nproc's degrees or raise "
        r"--nproc$",
    ):
        GLOO_CPU.with_overrides(degrees=(1, 8))
    with pytest.raises(
        ProfileError,
        match=r"degrees \[16\] exceed nproc 8: .* dp and zero add the whole-node "
        r"degrees 16 by themselves",
    ):
        TWO_BY_EIGHT.with_overrides(degrees=(1, 16))
    with pytest.raises(ProfileError, match=r"degrees \[12\] exceed nproc 8: .* whole-node degrees 16 by"):
        TWO_BY_EIGHT.with_overrides(degrees=(1, 12))


# ---------------------------------------------------------------- the model (suite/costmodel/alphabeta.py)


def test_cross_node_all_reduce_is_checklists_ring_at_the_inter_node_beta():
    size = 1 << 30
    intra, inter = (5e-6, 450e9), (12e-6, 45e9)
    assert allreduce_across_nodes_s(size, 8, 8, intra, inter) == ring_allreduce_s(size, 8, *intra)
    assert allreduce_across_nodes_s(size, 16, 8, intra, inter) == pytest.approx(
        2 * 15 * (12e-6 + size / (16 * 45e9))
    )
    # One β everywhere: CHECKLIST.md's ring at every degree, within a node or across (8 cards, 1 GB: 9465.2
    # µs).
    same = (5e-6, 200e9)
    assert allreduce_across_nodes_s(1 << 30, 8, 4, same, same) * 1e6 == pytest.approx(9465.2, abs=0.05)
    assert allreduce_across_nodes_s(4 << 20, 4, 2, same, same) * 1e6 == pytest.approx(61.5, abs=0.05)
    assert [nodes_spanned(n, 8) for n in (1, 8, 9, 16, 24)] == [1, 1, 2, 2, 3]


# ---------------------------------------------------------------- which α-β a degree is held to
# (suite/facts.py)


@pytest.mark.parametrize("fits", ["both", "inter only", "intra only", "none"])
def test_each_degree_takes_its_own_fit_and_falls_back_alone(fits):
    facts = {
        **({"alpha_beta": INTER} if fits in ("both", "inter only") else {}),
        **({"alpha_beta_intra": INTRA} if fits in ("both", "intra only") else {}),
    }
    within, across = alpha_beta_at(facts, TWO_BY_EIGHT, 8), alpha_beta_at(facts, TWO_BY_EIGHT, 16)
    assert not within.across_nodes and across.across_nodes
    if "intra" in fits or fits == "both":
        assert (within.alpha_s, within.beta_Bps, within.fitted) == (4e-6, 400e9, True)
        assert "the intra-node fit" in within.source
    else:  # never the cross-node fit for a degree within a node: the defaults, said so
        assert (within.alpha_s, within.beta_Bps, within.fitted) == (5e-6, 200e9, False)
        assert within.source.startswith("no intra-node fit: CHECKLIST.md's worked example")
    if "inter" in fits or fits == "both":
        assert (across.alpha_s, across.beta_Bps, across.fitted) == (12e-6, 45e9, True)
        assert (
            "the inter-node fit over all 2 nodes" in across.source
            and "nccl-tests all_reduce" in across.source
        )
    else:  # the NICs' usual rate, not the NVLink default
        assert (across.alpha_s, across.beta_Bps, across.fitted) == (5e-6, 50e9, False)
        assert across.source.startswith("no inter-node fit:") and "400 Gb/s NICs" in across.source
    # On one node every degree keeps the one rule (facts['alpha_beta'] is then the node's own fit).
    assert alpha_beta_at(facts, NCCL_GPU, 8) == alpha_beta(facts, "cuda")


def test_the_cpu_rehearsal_across_namespaces_falls_back_to_the_gloo_defaults():
    within, across = alpha_beta_at({}, TWO_BY_TWO, 2), alpha_beta_at({}, TWO_BY_TWO, 4)
    assert (within.beta_Bps, across.beta_Bps) == (2e9, 2e9)
    assert within.source.startswith("no intra-node fit: gloo over loopback")
    assert across.source.startswith("no inter-node fit: gloo over loopback") and "(2 nodes)" in across.source


# ---------------------------------------------------------------- dp's and zero's predictions


def test_dp_predicts_within_node_degrees_with_the_intra_fit_and_the_cross_node_degree_with_the_inter():
    facts = {
        "profile": TWO_BY_EIGHT.to_dict(),
        "baseline": {"step_time_s": 0.07},
        "alpha_beta": INTER,
        "alpha_beta_intra": INTRA,
    }
    exp = {e.world: e for e in dp.expect(TWO_BY_EIGHT, facts) if e.metric == "efficiency"}
    assert sorted(exp) == [1, 2, 4, 8, 16]
    g = dp.grad_bytes(TWO_BY_EIGHT)
    t1 = 0.07 * 2  # the baseline's step on batch 8, twice the tokens for dp's batch of 16
    assert exp[8].value == pytest.approx(dp_efficiency(t1, 8, g, 4e-6, 400e9), rel=1e-12)
    assert exp[16].value == pytest.approx(dp_efficiency(t1, 16, g, 12e-6, 45e9), rel=1e-12)
    assert "across 2 nodes" in exp[16].basis and "the inter-node fit" in exp[16].basis
    assert "within node 0" in exp[8].basis and "the intra-node fit" in exp[8].basis
    assert "× 2 for the global batch of 16" in exp[16].basis
    golden = [e for e in dp.expect(TWO_BY_EIGHT, facts) if e.metric == "max_abs_error"]
    assert sorted(e.world for e in golden) == [1, 2, 4, 8, 16]
    # A single-node profile's expectations are what they were: the one fit, no place named.
    one = [
        e for e in dp.expect(NCCL_GPU, {**facts, "profile": NCCL_GPU.to_dict()}) if e.metric == "efficiency"
    ]
    assert sorted(e.world for e in one) == [1, 2, 4, 8]
    assert all("node" not in e.basis and "baseline step 70 ms;" in e.basis for e in one)


def test_zero_across_nodes_expects_a_step_time_per_degree_only_on_a_multi_node_profile():
    facts = {"profile": TWO_BY_EIGHT.to_dict(), "baseline": {"step_time_s": 0.07}, "alpha_beta": INTER}
    steps = {(e.world, e.zero): e for e in zero.expect(TWO_BY_EIGHT, facts) if e.metric == "step_time_s"}
    assert sorted(steps) == [(n, z) for n in (8, 16) for z in (0, 1, 2, 3)]
    assert "the inter-node fit" in steps[(16, 3)].basis and "no intra-node fit" in steps[(8, 3)].basis
    assert steps[(16, 3)].value > steps[(16, 0)].value  # 1.5 all-reduces against 1
    assert {e.world for e in zero.expect(TWO_BY_EIGHT, facts)} == {8, 16}
    single = zero.expect(NCCL_GPU, {**facts, "profile": NCCL_GPU.to_dict()})
    assert {e.world for e in single} == {8} and not [e for e in single if e.metric == "step_time_s"]


# ---------------------------------------------------------------- verdicts, headlines, figures


def dp_rows(efficiency: dict[int, float], names=("node-a",) * 2 + ("node-b",) * 2) -> list[Row]:
    rows = [
        Row(stage="dp", case="params_after_training", metric="max_abs_error", value=1e-8, unit="abs", world=d)
        for d in efficiency
    ]
    rows += [
        Row(stage="dp", case="train_step", metric="efficiency", value=v, unit="ratio", world=d)
        for d, v in efficiency.items()
    ]
    return rows + nodes_rows(list(names), list(efficiency), "dp")


def test_dp_verdicts_name_the_degree_that_crossed_and_the_beta_it_was_held_to():
    gpu = TWO_BY_TWO.with_overrides(judge_performance=True)
    facts = {
        "profile": gpu.to_dict(),
        "alpha_beta": {**INTER, "world": 4},
        "alpha_beta_intra": {**INTRA, "world": 2},
    }
    predicted = [
        Expectation(
            stage="dp", case="train_step", metric="efficiency", value=v, unit="ratio", basis="α-β", world=d
        )
        for d, v in {1: 1.0, 2: 0.9, 4: 0.6}.items()
    ]
    got = by_id(dp.judge(dp_rows({1: 1.0, 2: 0.88, 4: 0.3}), predicted, facts))
    assert sorted(k for k in got if k.startswith("dp.golden")) == [
        "dp.golden.world1",
        "dp.golden.world2",
        "dp.golden.world4",
    ]
    assert "DDP over 4 ranks across 2 nodes trains exactly" in got["dp.golden.world4"].reason
    decay = got["dp.decay"]
    assert decay.status == "warn" and "4 ranks across 2 nodes: 0.30 (α-β 0.60)" in decay.observed
    assert "1–2 ranks within node 0 held to the intra-node β = 400 GB/s" in decay.expected
    assert "4 ranks across 2 nodes held to the inter-node β = 45 GB/s" in decay.expected
    assert "4 ranks across 2 nodes decays more" in decay.reason and "NCCL_SOCKET_IFNAME" in decay.reason
    assert got["dp.nodes"].status == "pass" and "4 ranks on node-a,node-b" in got["dp.nodes"].observed
    # Ranks not numbered node by node: degree 2 spread over both nodes is named.
    mixed = by_id(dp.judge(dp_rows({1: 1.0, 2: 0.9, 4: 0.6}, ("node-a", "node-b") * 2), predicted, facts))
    assert mixed["dp.nodes"].status == "warn" and mixed["dp.nodes"].reason.startswith(
        "2 ranks ran on other nodes"
    )
    # The CPU rehearsal skips the decay but still says where each degree ran and what it was held to.
    cpu = by_id(
        dp.judge(dp_rows({1: 1.0, 2: 0.9, 4: 0.6}), predicted, {**facts, "profile": TWO_BY_TWO.to_dict()})
    )
    assert cpu["dp.decay"].status == "skip" and "4 ranks across 2 nodes" in cpu["dp.decay"].observed
    assert "inter-node β" in cpu["dp.decay"].expected
    # One node: no node verdict, no place in the text (as before).
    one = by_id(dp.judge(dp_rows({1: 1.0, 2: 0.9, 4: 0.6}), predicted, {"profile": GLOO_CPU.to_dict()}))
    assert "dp.nodes" not in one and "node" not in one["dp.decay"].observed + one["dp.decay"].expected


def zero_rows(steps: dict[tuple[int, int], float]) -> list[Row]:
    rows = []
    for (n, z), t in steps.items():
        rows += [
            Row(
                stage="zero",
                case="params_after_training",
                metric="max_abs_error",
                value=1e-8,
                unit="abs",
                world=n,
                zero=z,
            ),
            Row(stage="zero", case="train_step", metric="step_time_s", value=t, unit="s", world=n, zero=z),
            Row(
                stage="zero",
                case="train_step",
                metric="peak_memory_bytes",
                value=4e9 - z * 1e9,
                unit="bytes",
                world=n,
                zero=z,
            ),
            Row(
                stage="zero",
                case="train_step",
                metric="state_memory_bytes",
                value=4e9 - z * 1e9,
                unit="bytes",
                world=n,
                zero=z,
            ),
        ]
    return rows + nodes_rows(["node-a", "node-a", "node-b", "node-b"], [2, 4], "zero")


def test_zero_verdicts_per_degree_and_the_cross_node_degree_held_to_the_inter_node_beta():
    gpu = TWO_BY_TWO.with_overrides(judge_performance=True)
    facts = {"profile": gpu.to_dict(), "alpha_beta": {**INTER, "world": 4}}
    predicted = [
        Expectation(
            stage="zero",
            case="train_step",
            metric="step_time_s",
            value=0.1,
            unit="s",
            basis="α-β",
            world=n,
            zero=z,
        )
        for n in (2, 4)
        for z in range(4)
    ]
    steps = {(n, z): 0.1 for n in (2, 4) for z in range(4)}
    got = by_id(zero.judge(zero_rows({**steps, (4, 3): 0.2}), predicted, facts))
    golden = sorted(k for k in got if k.startswith("zero.golden"))
    assert golden == sorted(
        [f"zero.golden.zero{z}" for z in range(4)] + [f"zero.golden.zero{z}.world4" for z in range(4)]
    )
    assert all(got[k].status == "pass" for k in golden)
    assert "ZeRO-3 over 4 ranks across 2 nodes trains exactly" in got["zero.golden.zero3.world4"].reason
    assert (
        got["zero.zero3_time"].status == "warn"
        and "at 4 ranks across 2 nodes" in got["zero.zero3_time"].reason
    )
    assert "2 ranks: 1.00×; 4 ranks across 2 nodes: 2.00×" in got["zero.zero3_time"].observed
    across = got["zero.across_nodes"]
    assert across.status == "warn" and across.reason.startswith(
        "ZeRO-3 at 4 ranks across 2 nodes slower than"
    )
    assert "4 ranks across 2 nodes held to the inter-node β = 45 GB/s" in across.expected
    assert "ZeRO-3 200 ms (α-β 100)" in across.observed
    assert got["zero.nodes"].status == "pass" and got["zero.memory"].status == "pass"
    fine = by_id(zero.judge(zero_rows(steps), predicted, facts))
    assert fine["zero.across_nodes"].status == "pass" and fine["zero.zero3_time"].status == "pass"
    one = zero.judge(zero_rows({(4, z): 0.1 for z in range(4)}), [], {"profile": GLOO_CPU.to_dict()})
    assert not [v for v in one if "across" in v.id or v.id == "zero.nodes" or ".world" in v.id]


def test_headlines_name_the_cross_node_degree():
    assert (
        dp.headline(dp_rows({1: 1.0, 2: 0.9, 4: 0.55}), [], [])
        == "DP=4 across 2 nodes scaling efficiency 55%"
    )
    one = [r for r in dp_rows({1: 1.0, 2: 0.9, 4: 0.55}, ("node-a",) * 4)]
    assert dp.headline(one, [], []) == "DP=4 scaling efficiency 55%"
    steps = {(n, z): 0.1 * (1 + z / 10) * (n / 2) for n in (2, 4) for z in range(4)}
    assert zero.headline(zero_rows(steps), [], []) == (
        "ZeRO-3 step 1.3× DDP, model-state memory 0.25× DDP at 4 ranks across 2 nodes"
    )


def frames(rows, expectations):
    return rows_to_frame(rows), pd.DataFrame([e.to_dict() for e in expectations])


def node_lines(fig) -> list:
    return [line for ax in fig.axes for line in ax.get_lines() if line.get_label() == "node boundary"]


def test_figures_mark_the_node_boundary_only_where_the_degrees_crossed_it():
    rows = dp_rows({1: 1.0, 2: 0.9, 4: 0.5})
    rows += [
        Row(stage="dp", case="train_step", metric="tokens_per_s_per_rank", value=900 / d, unit="x", world=d)
        for d in (1, 2, 4)
    ]
    model = [
        Expectation(stage="dp", case="train_step", metric=m, value=v, unit="x", basis="b", world=d)
        for d in (1, 2, 4)
        for m, v in (("efficiency", 1.0 / d), ("tokens_per_s_per_rank", 1000 / d))
    ]
    made = stage_figures("dp", *frames(rows, model), {})
    assert not made.notes
    lines = node_lines(made.figures[0])
    assert len(lines) == 2 and all(list(line.get_xdata()) == [3.0, 3.0] for line in lines)  # between 2 and 4
    single = [r for r in rows if r.metric != "nodes_spanned"]
    assert not node_lines(stage_figures("dp", *frames(single, model), {}).figures[0])

    steps = {(n, z): 0.1 for n in (2, 4) for z in range(4)}
    zmodel = [
        Expectation(
            stage="zero",
            case="train_step",
            metric="step_time_s",
            value=0.12,
            unit="s",
            basis="b",
            world=n,
            zero=z,
        )
        for n in (2, 4)
        for z in range(4)
    ]
    made = stage_figures("zero", *frames(zero_rows(steps), zmodel), {})
    # memory and step at node 0's degree, across degrees, golden
    assert not made.notes and len(made.figures) == 3
    memory = made.figures[0].axes[0]
    assert len(memory.patches) == 12  # 4 stages × (peak, state, expected) at one degree, not both
    across = made.figures[1]
    assert len(node_lines(across)) == 1 and "ZeRO-3 α-β" in [
        line.get_label() for line in across.axes[0].get_lines()
    ]
