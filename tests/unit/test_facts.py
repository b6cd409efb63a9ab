"""Typed facts (suite/facts.py): one α-β rule for every stage, and the ring's link peak from real topo
captures."""

from __future__ import annotations

import dataclasses

import pytest

from suite import facts as F
from suite.config import GLOO_CPU, NCCL_GPU
from suite.costmodel.alphabeta import ring_allreduce_s
from suite.costmodel.buckets import NO_OVERLAP, no_overlap_prediction
from suite.costmodel.scaling_expectations import dp_efficiency
from suite.results import Row
from suite.stages import bandwidth, crossover, dp, overlap

from .topo_boxes import box_facts

# ---------------------------------------------------------------- the ring's slowest hop (issue 12 items 2,
# 8)


@pytest.mark.parametrize(
    "stem,model,GBps,kind",
    [
        ("30-h100-8gpu-nv18-8nic-env-dump", "NVIDIA H100 80GB HBM3", 450.0, "nvlink"),  # NVSwitch: 18 × 25
        ("29-a100-8gpu-nv12-10nic-4numa", "NVIDIA A100-SXM4-80GB", 300.0, "nvlink"),  # NVSwitch: 12 × 25
        # 4-GPU slice, NV6 pairs
        (
            "25-h100-4gpu-nv6-4nic-numa-3175",
            "NVIDIA H100 80GB HBM3",
            150.0,
            "nvlink",
        ),
        ("26-gb200-4gpu-nv18", "NVIDIA GB200", 900.0, "nvlink"),  # 18 × 50
        # NV6 mesh; model from its layout
        (
            "35-4gpu-nv6-full-mesh-numa-per-gpu",
            "NVIDIA GH200 120GB",
            150.0,
            "nvlink",
        ),
        ("01-dgx1-v100-8gpu-mlx5", "Tesla V100-SXM2-16GB", 50.0, "nvlink"),  # an all-NV2 ring exists
        ("33-v100-8gpu-hybrid-cube-mesh-node", "Tesla V100-SXM2-32GB", 50.0, "nvlink"),
        # bridged pair, ring crosses SYS
        (
            "32-a100-4gpu-nv12-bridge-pairs-sys",
            "NVIDIA A100-PCIE-40GB",
            31.5,
            "sys",
        ),
        # 4 bridged pairs, 2 NUMA nodes
        (
            "34-h100-nvl-8gpu-nv12-pairs-sglang",
            "NVIDIA H100 NVL",
            63.0,
            "sys",
        ),
        ("14-rtx4090-8gpu-sys-2nic", "NVIDIA GeForce RTX 4090", 31.5, "sys"),
        ("05-a100-pcie-2gpu-node-1nic", "NVIDIA A100-PCIE-40GB", 31.5, "pcie"),
        ("31-l40s-2gpu-node-vllm-collect-env", "NVIDIA L40S", 31.5, "pcie"),
    ],
)
def test_link_peak_is_the_best_rings_slowest_hop(stem, model, GBps, kind):
    peak = F.link_peak(box_facts(stem, model))
    assert peak is not None and (peak.per_gpu_GBps, peak.kind) == (GBps, kind), peak
    assert model in peak.basis and "slowest hop" in peak.basis


def test_pcie_width_and_generation_of_the_slowest_hop_count():
    stem, model = "05-a100-pcie-2gpu-node-1nic", "NVIDIA A100-PCIE-40GB"
    narrow = F.link_peak(
        box_facts(stem, model, {"GPU0": {"gen": 4, "width": 16}, "GPU1": {"gen": 4, "width": 8}})
    )
    assert narrow.per_gpu_GBps == 15.75 and "Gen4 x8" in narrow.basis
    gen3 = F.link_peak(
        box_facts(stem, model, {"GPU0": {"gen": 3, "width": 16}, "GPU1": {"gen": 4, "width": 16}})
    )
    assert gen3.per_gpu_GBps == 15.75 and "Gen3 x16" in gen3.basis


def test_nvlink_bridged_pcie_box_is_held_to_its_sys_hop_and_warns():
    # Before: the "NVLink mesh" class read as nvlink=True and held this box to A100's 300 GB/s NVSwitch peak.
    facts = box_facts("32-a100-4gpu-nv12-bridge-pairs-sys", "NVIDIA A100-PCIE-40GB")
    floor = [
        e for e in bandwidth.expect(NCCL_GPU, facts) if e.metric == "busbw_min" and e.case == "all_reduce"
    ]
    assert len(floor) == 1 and floor[0].value == pytest.approx(0.4 * 31.5)  # a PCIe ring: PCIE_SHARE
    curve = {"all_reduce": {1 << 20: 8.0, 1 << 30: 11.0}}
    v = bandwidth.judge_peak(curve, "nccl-tests", [], facts)
    assert len(v) == 1 and v[0].status == "warn"
    assert "host memory" in v[0].reason and "GPU" in v[0].expected and "SYS" in v[0].expected


def test_eight_h100_nvl_are_held_to_pcie_not_the_nvswitch_peak():
    # Before: 450 GB/s (NVLink 4 × 18) and a 315 GB/s floor, which the ring over PCIe/SYS never reaches.
    facts = box_facts(
        "34-h100-nvl-8gpu-nv12-pairs-sglang",
        "NVIDIA H100 NVL",
        {f"GPU{i}": {"gen": 5, "width": 16} for i in range(8)},
    )
    peak = F.link_peak(facts)
    assert (
        (peak.per_gpu_GBps, peak.kind) == (63.0, "sys") and "SYS" in peak.basis and "Gen5 x16" in peak.basis
    )
    # later stages' default β is this box's, not NVSwitch's
    assert F.alpha_beta(facts, "cuda").beta_Bps == 63e9
    v = bandwidth.judge_peak({"all_reduce": {1 << 30: 20.0}}, "nccl-tests", [], facts)  # under 40% of 63
    assert [x.status for x in v] == ["warn"]
    assert [
        x.status for x in bandwidth.judge_peak({"all_reduce": {1 << 30: 50.0}}, "nccl-tests", [], facts)
    ] == ["pass"]


def test_mesh_ring_peak_is_its_slowest_nvlink_hop():
    # The 4-GPU V100 SXM2 partial mesh (GPUs 0, 1, 4, 5 of capture 33): an all-NVLink ring exists,
    # 0→1 NV2, 1→3 NV1, 3→2 NV2, 2→0 NV1, so the ring runs at one NVLink 2 (25 GB/s), never PCIe's.
    facts = box_facts(
        "33-v100-8gpu-hybrid-cube-mesh-node", "Tesla V100-SXM2-32GB", keep=["GPU0", "GPU1", "GPU4", "GPU5"]
    )
    peak = F.link_peak(facts)
    assert (peak.per_gpu_GBps, peak.kind) == (25.0, "nvlink") and "NV1" in peak.basis


def test_pcie_box_below_its_peak_still_fails():
    facts = box_facts("05-a100-pcie-2gpu-node-1nic", "NVIDIA A100-PCIE-40GB")
    v = bandwidth.judge_peak({"all_reduce": {1 << 30: 10.0}}, "nccl-tests", [], facts)
    assert [x.status for x in v] == ["fail"]
    ok = bandwidth.judge_peak({"all_reduce": {1 << 30: 25.0}}, "nccl-tests", [], facts)
    assert [x.status for x in ok] == ["pass"]


def test_no_topology_gives_no_peak_and_says_why():
    peak, why = F.link_peak_or_why({})
    assert peak is None and "no GPU model" in why
    peak, why = F.link_peak_or_why(
        {"topology": {"gpu_model": "NVIDIA GeForce RTX 4090", "pcie": {"gen_max": 4}}}
    )
    assert peak.per_gpu_GBps == 31.5 and peak.kind == "pcie" and "no topology matrix" in peak.basis


# ---------------------------------------------------------------- one α-β rule for every stage (issue 18)


def stage_alpha_betas(facts: dict) -> dict[str, tuple[float, float]]:
    """The α, β each stage's expect() predicted with, read back out of its expectations."""
    n, size = NCCL_GPU.nproc, 1 << 24
    ab = F.alpha_beta(facts, "cuda")
    out = {}
    bw = [
        e
        for e in bandwidth.expect(NCCL_GPU, facts)
        if e.case == "all_reduce" and e.metric == "time_us" and e.size_bytes == size
    ]
    co = [
        e
        for e in crossover.expect(NCCL_GPU, facts)
        if e.case == "ring" and e.metric == "time_us" and e.size_bytes == size
    ]
    grads = sum(overlap.gradient_sizes(NCCL_GPU.model))
    ov = [
        e
        for e in overlap.expect(NCCL_GPU, facts)
        if e.metric == "predicted_comm_s" and e.overlap == NO_OVERLAP
    ]
    dps = [e for e in dp.expect(NCCL_GPU, facts) if e.metric == "efficiency" and e.world == 8]
    assert len(bw) == len(co) == len(ov) == len(dps) == 1
    model = {
        "bandwidth": ring_allreduce_s(size, n, ab.alpha_s, ab.beta_Bps) * 1e6,
        "crossover": ring_allreduce_s(size, n, ab.alpha_s, ab.beta_Bps) * 1e6,
        "overlap": no_overlap_prediction(grads, n, ab.alpha_s, ab.beta_Bps).comm_s,
        "dp": dp_efficiency(0.07, 8, dp.grad_bytes(NCCL_GPU), ab.alpha_s, ab.beta_Bps),
    }
    for stage, got in (("bandwidth", bw[0]), ("crossover", co[0]), ("overlap", ov[0]), ("dp", dps[0])):
        out[stage] = (got.value, model[stage])
    return out


@pytest.mark.parametrize("fitted", [False, True])
def test_every_stage_predicts_with_the_same_alpha_beta(fitted):
    # Before: crossover/overlap fell back to the link peak (450 GB/s here) and dp to 200 GB/s, in one run.
    facts = {
        **box_facts("30-h100-8gpu-nv18-8nic-env-dump", "NVIDIA H100 80GB HBM3"),
        "baseline": {"step_time_s": 0.07},
    }
    if fitted:
        facts["alpha_beta"] = {
            "alpha_s": 7e-6,
            "beta_Bps": 120e9,
            "rms_rel_residual": 0.05,
            "source": "nccl-tests",
            "world": 8,
            "points": 12,
        }
    ab = F.alpha_beta(facts, "cuda")
    assert (ab.alpha_s, ab.beta_Bps, ab.fitted) == ((7e-6, 120e9, True) if fitted else (5e-6, 450e9, False))
    got = stage_alpha_betas(facts)
    assert sorted(got) == ["bandwidth", "crossover", "dp", "overlap"]
    for stage, (value, predicted) in got.items():
        assert value == pytest.approx(predicted, rel=1e-12), stage


def test_the_fallback_rule():
    assert tuple(F.alpha_beta({}, "cuda"))[:2] == (5e-6, 200e9)
    assert tuple(F.alpha_beta({}, "cpu"))[:2] == (30e-6, 2e9)
    gpu_box = box_facts("30-h100-8gpu-nv18-8nic-env-dump", "NVIDIA H100 80GB HBM3")
    assert F.alpha_beta(gpu_box, "cpu").beta_Bps == 2e9  # the rehearsal never takes a GPU link peak
    for unusable in (0.0, float("inf"), None):
        assert not F.alpha_beta(
            {**gpu_box, "alpha_beta": {"alpha_s": 1e-6, "beta_Bps": unusable}}, "cuda"
        ).fitted
    fit = F.alpha_beta({"alpha_beta": {"alpha_s": 7e-6, "beta_Bps": 150e9, "source": "nccl-tests"}}, "cuda")
    assert fit.fitted and "nccl-tests" in fit.source and "fitted" in fit.source


def test_no_stage_keeps_its_own_alpha_beta_or_link_peak():
    from suite.stages import baseline, topology, tp, zero

    own = [
        f"{m.__name__}.{name}"
        for m in (bandwidth, crossover, overlap, dp, baseline, topology, tp, zero)
        for name in ("alpha_beta", "DEFAULT_ALPHA_BETA", "link_peak", "gpu_name")
        if getattr(m, name, None) is not None
        and getattr(getattr(m, name), "__module__", m.__name__) == m.__name__
    ]
    assert own == []


def test_published_fit_round_trips_through_json_facts():
    fit = F.FittedAlphaBeta(
        alpha_s=7e-6, beta_Bps=1.5e11, rms_rel_residual=0.02, source="torch", world=4, points=10
    )
    stored = dataclasses.asdict(fit)  # what StageContext.publish keeps in the manifest
    assert F.FittedAlphaBeta.from_facts({"alpha_beta": stored}) == fit


def test_profile_and_gpu_model_readers():
    facts = box_facts("29-a100-8gpu-nv12-10nic-4numa", "NVIDIA A100-SXM4-80GB")
    assert F.profile(facts) == NCCL_GPU
    assert F.profile({"profile": GLOO_CPU.to_dict()}).device == "cpu"
    assert F.gpu_model(facts) == "NVIDIA A100-SXM4-80GB" and F.gpu(facts).model == "A100 SXM"
    assert (
        F.gpu_model({"topology": {"gpu_model": None, "gpus": ["NVIDIA H100 80GB HBM3"]}})
        == "NVIDIA H100 80GB HBM3"
    )
    assert F.gpu_model({}) is None and F.gpu({}) is None


def test_fit_rows_feed_the_published_fact():
    from suite.stages._alphabeta_fit import fit_rows, pick_fit

    alpha, beta, n = 7e-6, 150e9, 8
    rows = [
        Row(
            stage="bandwidth",
            case="all_reduce",
            metric="time_us",
            value=ring_allreduce_s(s, n, alpha, beta) * 1e6,
            unit="us",
            source="torch",
            placement="ip",
            world=n,
            size_bytes=s,
        )
        for s in (2**k for k in range(3, 31, 3))
    ]
    fit = pick_fit(fit_rows(rows, n))
    assert isinstance(fit, F.FittedAlphaBeta) and fit.points == 10
    assert F.alpha_beta({"alpha_beta": dataclasses.asdict(fit)}, "cuda").beta_Bps == pytest.approx(
        beta, rel=1e-6
    )


def test_publish_keeps_a_typed_fact_as_its_json_dict(tmp_path):
    import json

    from suite.context import StageContext

    ctx = StageContext(
        stage="bandwidth", profile=GLOO_CPU, run_path=tmp_path, raw_dir=tmp_path, facts={}, progress=None
    )
    fit = F.FittedAlphaBeta(
        alpha_s=3e-5, beta_Bps=2e9, rms_rel_residual=0.1, source="torch", world=4, points=10
    )
    ctx.publish("alpha_beta", fit)
    ctx.publish("plain", {"a": 1})
    assert ctx.published["alpha_beta"] == dataclasses.asdict(fit) and ctx.published["plain"] == {"a": 1}
    again = json.loads(json.dumps(ctx.published))  # the manifest's round trip: a resumed run reads the same
    assert F.FittedAlphaBeta.from_facts(again) == fit
