"""make plan NODES=2 | HOSTS=a,b (suite/plan/hours.py): every launch spans the nodes, the ring's slowest hop
is the NIC."""

from __future__ import annotations

import pytest

from suite.__main__ import main as suite_main
from suite.cluster.node_nics import PROBE_S
from suite.config import get_profile
from suite.costmodel.alphabeta import ZERO_COMM_ALLREDUCES, ring_allreduce_s
from suite.hardware.gpus import gpu_for
from suite.plan.hours import PlanAssumptions, estimate, plan_inputs, render, step_compute_s
from suite.stages.bandwidth.node_pairs import PAIR_BYTES, PAIR_ITERS


def test_two_nodes_are_sixteen_gpus_at_the_inter_node_beta_plus_the_multi_node_parts():
    a = PlanAssumptions()
    two = estimate(get_profile("nccl-gpu", 8), PlanAssumptions(nodes=2))
    # The same plan on one box of 16 GPUs whose links run at the NIC's share and whose launches pay the
    # rendezvous:
    flat = estimate(
        get_profile("nccl-gpu", 16),
        PlanAssumptions(beta_Bps=a.inter_node_Bps, torchrun_launch_s=a.torchrun_launch_s + a.rendezvous_s),
    )
    assert two.gpus == 16 and two.nodes == 2 and two.beta_Bps == a.inter_node_Bps
    assert len(two.stages) == len(flat.stages) > 10
    launch = a.torchrun_launch_s + a.rendezvous_s
    pairs = launch + 2 * 1 * (1 + PAIR_ITERS) * (a.alpha_s + PAIR_BYTES / a.inter_node_Bps)
    from suite.plan.hours import plan_inputs
    from suite.stages.bandwidth.intra_node import estimate_s as intra_estimate_s

    # each node's own sweep
    intra = intra_estimate_s(plan_inputs(get_profile("nccl-gpu", 8), PlanAssumptions(nodes=2)))
    assert intra > 0  # tests/unit/test_intra_node.py checks its arithmetic
    extra = {"topology": PROBE_S, "bandwidth": pairs + intra}
    for mine, theirs in zip(two.stages, flat.stages):
        assert mine.stage == theirs.stage
        if mine.stage in ("dp", "zero"):  # their degrees within a node keep the NVLink β (the next test)
            continue
        assert mine.seconds == pytest.approx(theirs.seconds + extra.get(mine.stage, 0.0), rel=1e-12), (
            mine.stage
        )
    assert "node-pair matrix" in dict((s.stage, s.basis) for s in two.stages)["bandwidth"]
    assert "each node's intra-node sweep" in dict((s.stage, s.basis) for s in two.stages)["bandwidth"]
    assert render(two).startswith(
        "plan for nccl-gpu on 2 nodes × 8 × H100 SXM (16 GPUs): α = 5 µs, β = 50 GB/s "
        "per direction (the inter-node hop)"
    )


def test_dp_and_zero_hold_within_node_degrees_to_nvlink_and_the_cross_node_degree_to_the_nic():
    a = PlanAssumptions()
    profile = get_profile("nccl-gpu", 8)
    two = {s.stage: s for s in estimate(profile, PlanAssumptions(nodes=2)).stages}
    nvlink, nic = gpu_for(a.gpu_name).nvlink_full_GBps * 1e9, a.inter_node_Bps
    assert nvlink == 450e9 and nic == 50e9
    launch, steps = a.torchrun_launch_s + a.rendezvous_s, profile.model.warmup_steps + profile.model.steps
    grads = plan_inputs(profile).grad_bytes
    # DP = 16 needs a global batch of 16 (one sequence per rank): every degree trains it, twice batch 8's
    # compute.
    step = 2 * step_compute_s(profile, gpu_for(a.gpu_name).bf16_dense_flops, a.mfu)
    beta = {1: nvlink, 2: nvlink, 4: nvlink, 8: nvlink, 16: nic}
    dp = sum(launch + steps * (step / d + ring_allreduce_s(grads, d, a.alpha_s, beta[d])) for d in beta)
    assert two["dp"].seconds == pytest.approx(dp, rel=1e-12)
    assert (
        "DP = 1/2/4/8/16" in two["dp"].basis
        and "DP = 16 across nodes at the inter-node β, global batch 16" in two["dp"].basis
    )
    zero = sum(
        launch + steps * (step / n + ZERO_COMM_ALLREDUCES[z] * ring_allreduce_s(grads, n, a.alpha_s, beta[n]))
        for n in (8, 16)
        for z in (1, 2, 3)
    )
    assert two["zero"].seconds == pytest.approx(zero, rel=1e-12)
    assert "ZeRO-1/2/3 on 8/16 cards (across nodes)" in two["zero"].basis
    # The cross-node degree costs more than the NVLink β would have made it.
    fast = sum(
        launch
        + steps * (step / 16 + ZERO_COMM_ALLREDUCES[z] * ring_allreduce_s(grads, 16, a.alpha_s, nvlink))
        for z in (1, 2, 3)
    )
    assert zero - fast > 1.0


def test_one_node_is_unchanged():
    one = estimate(get_profile("nccl-gpu", 8), PlanAssumptions(nodes=1))
    base = estimate(get_profile("nccl-gpu", 8))
    assert [(s.stage, s.seconds) for s in one.stages] == [(s.stage, s.seconds) for s in base.stages]


def test_cli_nodes_by_count_or_by_list(capsys):
    assert (
        suite_main(
            ["plan", "--gpus", "8", "--nodes", "root@gpu-a,root@gpu-b:2222,gpu-c", "--inter-node", "25"]
        )
        == 0
    )
    assert "on 3 nodes × 8 × H100 SXM (24 GPUs)" in capsys.readouterr().out
    assert suite_main(["plan", "--gpus", "8", "--nodes", "2"]) == 0
    assert "on 2 nodes × 8" in capsys.readouterr().out
    assert suite_main(["plan", "--nodes", "root@a,,root@b"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "node 2 of the list is empty" in err[0]
