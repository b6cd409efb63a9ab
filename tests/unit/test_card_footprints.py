"""Each sized stage's footprint on every GPU of suite/hardware/gpus.py, held under the card's memory
(suite/hardware/card_fit.py).

The card memories below are the smallest SKU's datasheet capacity (GB = 1e9 bytes), taken at 93% so that the
figure is below what `nvidia-smi -q` reports as FB Memory Total on every real card (a 24 GB A10G reports 23028
MiB = 24.1e9 B; 0.93 × 24e9 = 22.3e9): the test holds the stages to less than the cards have. Sources:
NVIDIA's datasheets for each part (GB200/GB300 NVL72: 13.4 TB / 20.7 TB HBM3e over 72 GPUs; HGX B200 1.44 TB
and HGX B300 2.3 TB over 8; H200 141 GB; H100 NVL 94 GB; H100 80 GB; GH200 96 GB HBM3 (its 480 GB is the Grace
CPU's LPDDR5X with it); H20 96 GB; A100 and A800 40 GB (PCIe and SXM4 40GB SKUs); V100 16/32 GB; P100 PCIe 12
GB; L40S/L40 48 GB; L4 24 GB; A10 24 GB; RTX 6000 Ada 48 GB; GeForce RTX 5090 32 GB and 4090 24 GB; T4 16 GB;
P4 8 GB). A10G (AWS G5, 24 GB: aws.amazon.com/ec2/instance-types/g5) is not in suite/hardware/gpus.py here: it
is added to the table.
"""

import dataclasses
import json

import pytest

from suite.config import NCCL_GPU
from suite.costmodel.sizing import parameter_count
from suite.hardware import card_fit
from suite.hardware.gpus import GPUS
from suite.workloads.collective_sweep import COLLECTIVES, FREE_SHARE, RESERVE_BYTES, fit_to_memory

from .test_bandwidth_crossover_stages import DATA as NCCL_DATA

CARD_GB = {
    "GB200": 186,
    "B200 (HGX)": 180,
    "GB300": 288,
    "B300": 288,
    "H200 NVL": 141,
    "H200 SXM": 141,
    "H100 NVL": 94,
    "H100 PCIe": 80,
    "H100 SXM": 80,
    "H800 PCIe": 80,
    "H800 SXM": 80,
    "GH200": 96,
    "H20": 96,
    "A100 PCIe": 40,
    "A100 SXM": 40,
    "A800 PCIe": 40,
    "A800 SXM": 80,
    "V100 SXM3": 32,
    "V100 PCIe": 16,
    "V100 SXM2": 16,
    "P100 PCIe": 12,
    "P100 SXM2": 16,
    "L40S": 48,
    "L40": 48,
    "L4": 24,
    "A10": 24,
    "A10G": 24,
    "GeForce RTX 5090": 32,
    "RTX 6000 Ada": 48,
    "GeForce RTX 4090": 24,
    "T4": 16,
    "P4": 8,
}
REPORTED_SHARE = 0.93


def card(model: str) -> int:
    return int(CARD_GB[model] * 1e9 * REPORTED_SHARE)


CARDS = sorted({g.model for g in GPUS} | {"A10G"})


def test_every_gpu_of_the_table_has_its_memory_here():
    missing = [g.model for g in GPUS if g.model not in CARD_GB]
    assert not missing, f"add the datasheet memory of {missing} to CARD_GB (with its source in the docstring)"


@pytest.mark.parametrize("model", CARDS)
def test_nccl_tests_fits_every_card(model):
    """bandwidth and crossover: every *_perf binary's send, receive and expected buffers at its sized -e."""
    top, basis = card_fit.nccl_tests_max_bytes(NCCL_GPU.sweep, card(model))
    assert card_fit.nccl_tests_footprint(top) <= card_fit.usable_bytes(card(model)) < card(model)
    assert top in NCCL_GPU.sweep.sizes()  # a step of the sweep, so nccl-tests' -e lands on its own sizes
    assert (
        top * NCCL_GPU.sweep.factor > card_fit.usable_bytes(card(model)) // 3
        or top == NCCL_GPU.sweep.max_bytes
    )
    assert "send + receive + expected" in basis and f"-e {top} B" in basis


def test_a_24_gb_card_runs_nccl_tests_to_4_gib_and_says_why():
    top, basis = card_fit.nccl_tests_max_bytes(NCCL_GPU.sweep, card("GeForce RTX 4090"))
    # -e 8G: 3 × 8 GiB on a 24 GB card, the reported OOM
    assert top == 4 << 30 and "would need 24 GiB" in basis
    assert card_fit.nccl_tests_max_bytes(NCCL_GPU.sweep, card("H100 SXM"))[0] == 8 << 30  # 80 GB keeps -e 8G
    # 40 GB: 24 GiB of 31
    assert card_fit.nccl_tests_max_bytes(NCCL_GPU.sweep, card("A100 SXM"))[0] == 8 << 30
    assert card_fit.nccl_tests_max_bytes(NCCL_GPU.sweep, None) == (
        NCCL_GPU.sweep.max_bytes,
        "the card's memory is not known: the profile's -e unchanged",
    )


@pytest.mark.parametrize("model", CARDS)
@pytest.mark.parametrize("world", [2, 4, 8])
def test_the_torch_sweep_fits_every_card(model, world):
    """bandwidth's torch sweep: the cases its memory budget keeps (the budget from the card's free memory,
    here the whole card less a CUDA context) each hold less than the card."""
    free = card(model) - (512 << 20)
    budget = int(max(0, free - RESERVE_BYTES) * FREE_SHARE)
    plan = [(c, s, p) for c in COLLECTIVES for s in NCCL_GPU.sweep.sizes() for p in COLLECTIVES[c].placements]
    kept, _ = fit_to_memory(plan, world, 4, budget)
    need = max(COLLECTIVES[c].peak_bytes(COLLECTIVES[c].counts(s, world, 4)[1], world, p) for c, s, p in kept)
    assert need <= budget < card(model)


@pytest.mark.parametrize("model", ["GeForce RTX 4090", "L4", "A10G", "A100 SXM", "L40S"])
def test_the_scaling_stages_model_fits_the_24_and_40_gb_cards(model):
    """tp, dp, zero, baseline at degree 1 train the model sized to the card whole on one GPU: the memory
    stage's formula (16Ψ state, its activations per block) plus the logits (bf16, and fp32 for the loss)."""
    from suite.hardware.stage_fit import scaling_model

    m = scaling_model(NCCL_GPU, facts_of(model))
    logits = m.batch * m.seq_len * m.vocab * (2 + 4)
    need = (
        card_fit.training_bytes(
            parameter_count(m), seq=m.seq_len, batch=m.batch, hidden=m.hidden, heads=m.heads, layers=m.layers
        )
        + logits
    )
    assert need <= card_fit.usable_bytes(card(model)), (
        need / 2**30,
        card_fit.usable_bytes(card(model)) / 2**30,
    )


def test_the_card_is_read_from_nvidia_smi_q():
    data = NCCL_DATA.parent / "smi"
    assert card_fit.memory_from_query((data / "h200-550-q.txt").read_text()) == 143771 << 20
    assert card_fit.memory_from_query((data / "a100-sxm4-525-q-one-process.txt").read_text()) == 81920 << 20
    assert card_fit.memory_from_query("Driver Version : 550\n") is None
    assert card_fit.card_bytes({"topology": {"gpu_memory_bytes": 1 << 34}}) == 1 << 34
    assert card_fit.card_bytes({}) is None


def test_the_nccl_tests_sweep_runs_the_binaries_at_the_cards_e(tmp_path, monkeypatch):
    from suite.stages import _nccl_tests

    from .test_bandwidth_crossover_stages import FOUR, FakeContext, stand_in, stand_in_mpirun

    bins, raw, tools = tmp_path / "build", tmp_path / "raw", tmp_path / "tools"
    bins.mkdir(), raw.mkdir(), tools.mkdir()
    # a 4 × RTX 4090 box's run
    stand_in(bins, "all_reduce_perf", "15-rtx4090-all_reduce-4gpu-pcie-docker.txt")
    stand_in_mpirun(tools)
    monkeypatch.setenv(_nccl_tests.DIR_ENV, str(tmp_path))
    monkeypatch.setenv("PATH", f"{tools}:/usr/bin:/bin")
    ctx = FakeContext(raw)
    ctx.facts = {"topology": {"gpu_memory_bytes": 24564 << 20}}  # what its nvidia-smi -q says: 24564 MiB
    rows = _nccl_tests.sweep(FOUR, ctx, ["all_reduce"])
    args = (bins / "all_reduce_perf.args").read_text().split("\n")[0].split()
    assert args[args.index("-e") + 1] == str(4 << 30)
    status = next(r.text for r in rows if r.metric == "status")
    assert (
        "sized: -e 4294967296 B: send + receive + expected buffers" in status
        and "would need 24 GiB" in status
    )


def facts_of(model: str) -> dict:
    return {"topology": {"gpu_memory_bytes": card(model)}}


SMALL_AND_MID = ["GeForce RTX 4090", "L4", "A10G", "A100 SXM", "A100 PCIe", "L40S"]


@pytest.mark.parametrize("model", CARDS)
def test_pp_sizes_its_gpt_to_every_card(model):
    """pp's heaviest rank (the float32 reference trained whole, the golden pipeline, the timed one) at the
    model the stage picks for the card, at its smallest degree (the largest share of the model): within the
    headroom; the next larger model (hidden doubled) would not fit unless it is the profile's own."""
    from suite.hardware.stage_fit import pp_footprint
    from suite.stages import pp

    facts, usable = facts_of(model), card_fit.usable_bytes(card(model))
    cfg, degree = pp.pp_model(NCCL_GPU, facts), min(pp.pp_degrees(NCCL_GPU))
    phases = pp_footprint(
        cfg, degree, NCCL_GPU.section("pp").timed_microbatches, NCCL_GPU.section("pp").micro_batch
    )
    assert max(phases.values()) <= usable, (cfg, {k: v / 2**30 for k, v in phases.items()})
    # a unit per stage
    assert cfg.layers == 16 and cfg.layers >= max(pp.pp_degrees(NCCL_GPU)) * NCCL_GPU.section("pp").chunks
    if cfg.hidden < NCCL_GPU.model.hidden:
        bigger = dataclasses.replace(cfg, hidden=cfg.hidden * 2)
        assert (
            max(
                pp_footprint(
                    bigger,
                    degree,
                    NCCL_GPU.section("pp").timed_microbatches,
                    NCCL_GPU.section("pp").micro_batch,
                ).values()
            )
            > usable
        )
    args = pp.worker_args(NCCL_GPU, facts=facts)
    assert json.loads(args[args.index("--model") + 1])["hidden"] == cfg.hidden
    sizing = [e for e in pp.expect(NCCL_GPU, facts) if e.case == "sizing"]
    assert len(sizing) == 1 and f"d={cfg.hidden}" in sizing[0].basis and "within 85%" in sizing[0].basis


def test_pp_on_24_40_and_80_gb_cards():
    from suite.stages import pp

    assert pp.pp_model(NCCL_GPU, facts_of("GeForce RTX 4090")).hidden == 512  # the 0.94 B model needs 55 GiB
    assert pp.pp_model(NCCL_GPU, facts_of("A100 SXM")).hidden == 1024
    assert pp.pp_model(NCCL_GPU, facts_of("H100 SXM")) == pp.pp_model(NCCL_GPU)  # 80 GB keeps the profile's
    assert "would need 55.0 GiB" in pp.pp_sizing(NCCL_GPU, facts_of("L4"))[1]
    assert not [e for e in pp.expect(NCCL_GPU, {}) if e.case == "sizing"]  # the card unknown: nothing sized


@pytest.mark.parametrize("model", CARDS)
def test_cp_drops_the_lengths_whose_scores_pass_every_card(model):
    """cp's timed lengths: each kept one's scores (Ulysses' B·H/P·S², the ring's B·H·S²/P) within the headroom
    at every degree it runs; each dropped one named with what it needed."""
    from suite.hardware.stage_fit import cp_footprint
    from suite.stages import cp

    c, facts = NCCL_GPU.section("cp"), facts_of(model)
    kept, said = cp.timed_lengths(NCCL_GPU, facts)
    for d in cp.degrees(NCCL_GPU):
        for s in kept:
            assert cp_footprint(c.batch, c.heads, c.head_dim, s, d) <= card_fit.usable_bytes(card(model))
    for s in c.seq_lens:
        assert (s in kept) != (f"S={s} (" in said)
    assert [e.value for e in cp.expect(NCCL_GPU, facts) if e.case == "sizing"] == [
        float(max(kept, default=0))
    ]


def test_cp_at_16384_fits_80_gb_only():
    from suite.stages import cp

    for model in ("GeForce RTX 4090", "L4", "A10G", "A100 SXM", "L40S"):
        assert cp.timed_lengths(NCCL_GPU, facts_of(model))[0] == (2048, 4096, 8192), model
    assert cp.timed_lengths(NCCL_GPU, facts_of("H100 SXM"))[0] == NCCL_GPU.section("cp").seq_lens
    assert cp.timed_lengths(NCCL_GPU, {})[0] == NCCL_GPU.section("cp").seq_lens


@pytest.mark.parametrize("model", CARDS)
def test_ep_timings_fit_every_card(model):
    from suite.dtypes import DTYPE_BYTES
    from suite.hardware.stage_fit import ep_footprint
    from suite.stages import ep

    c = NCCL_GPU.section("ep")
    tokens, said = ep.timed_tokens(NCCL_GPU, facts_of(model))
    need = ep_footprint(c.experts, c.top_k, tokens, c.hidden, c.ffn, NCCL_GPU.nproc, DTYPE_BYTES[c.dtype])
    assert need <= card_fit.usable_bytes(card(model)) and f"{tokens} tokens per rank" in said
    if model in SMALL_AND_MID:
        assert tokens == c.tokens  # 24 GB and up keep the profile's 8192


@pytest.mark.parametrize("model", SMALL_AND_MID)
def test_the_fixed_size_stages_fit_the_24_and_40_gb_cards(model):
    """precision's tiny GPT and the memory stage's search (capped at its budget) on the 24 and 40 GB cards."""
    from suite.costmodel.memory_formula import activation_bytes_per_layer
    from suite.stages.memory import ONE_CARD

    usable = card_fit.usable_bytes(card(model))
    assert ONE_CARD.budget_gib * 2**30 <= usable  # the memory stage holds itself to its budget
    p = NCCL_GPU.section("precision").model()
    assert (
        card_fit.training_bytes(
            parameter_count(p),
            seq=p.seq_len,
            batch=p.batch,
            hidden=p.hidden,
            heads=p.heads,
            layers=p.layers,
            copies=4,
        )
        < usable
    )
    assert activation_bytes_per_layer(p.seq_len, p.batch, p.hidden, p.heads) < 2**20


@pytest.mark.parametrize("model", CARDS)
def test_the_scaling_stages_size_one_model_to_every_card(model):
    """baseline, tp, dp, zero, overlap and profile: the float32 reference trained whole (dp, zero) and the
    measured model beside its kept parameters, at degree 1 — the heaviest: TP = d holds 1/d of the blocks, DP
    = d 1/d of the batch, ZeRO shards the state — within the headroom; every stage passes its workers the same
    width."""
    from suite.hardware.stage_fit import scaling_dp_model, scaling_footprint, scaling_model
    from suite.stages import profile as profile_stage
    from suite.workloads.worker_cli import model_args

    facts = facts_of(model)
    cfg = scaling_model(NCCL_GPU, facts)
    assert max(scaling_footprint(cfg).values()) <= card_fit.usable_bytes(card(model)), (model, cfg.hidden)
    assert scaling_dp_model(NCCL_GPU, facts).batch == NCCL_GPU.dp_model.batch
    assert json.loads(model_args(scaling_dp_model(NCCL_GPU, facts))[1])["hidden"] == cfg.hidden
    args = profile_stage.worker_args(NCCL_GPU, "/tmp", None, facts)
    assert json.loads(args[args.index("--model") + 1])["hidden"] == cfg.hidden


def test_the_scaling_model_on_24_40_and_80_gb_cards():
    from suite.hardware.stage_fit import scaling_model
    from suite.stages import baseline

    assert scaling_model(NCCL_GPU, facts_of("A10G")).hidden == 1024  # the reference alone would need 25 GiB
    assert scaling_model(NCCL_GPU, facts_of("A100 PCIe")) == NCCL_GPU.model
    assert scaling_model(NCCL_GPU, facts_of("H100 SXM")) == NCCL_GPU.model
    said = [e.basis for e in baseline.expect(NCCL_GPU, facts_of("L4")) if e.metric == "sizing"]
    assert len(said) == 1 and "d=1024" in said[0] and "would need 25.0 GiB" in said[0]


def test_the_rehearsal_sizes_nothing():
    """gloo-cpu's topology publishes no card memory: every stage keeps its profile's sizes and adds no
    expectation, so the rehearsal's verdicts and speed are those of the profile as written."""
    from suite.config import GLOO_CPU
    from suite.hardware.stage_fit import scaling_dp_model, scaling_model
    from suite.stages import baseline, cp, ep, pp

    facts = {"topology": {"gpus": []}}
    assert pp.pp_model(GLOO_CPU, facts) == dataclasses.replace(
        GLOO_CPU.model, layers=GLOO_CPU.section("pp").layers or GLOO_CPU.model.layers
    )
    assert cp.timed_lengths(GLOO_CPU, facts)[0] == GLOO_CPU.section("cp").seq_lens
    assert ep.timed_tokens(GLOO_CPU, facts)[0] == GLOO_CPU.section("ep").tokens
    assert (
        scaling_model(GLOO_CPU, facts) == GLOO_CPU.model
        and scaling_dp_model(GLOO_CPU, facts) == GLOO_CPU.dp_model
    )
    for stage in (baseline, cp, ep, pp):
        assert not [e for e in stage.expect(GLOO_CPU, facts) if "sizing" in (e.case, e.metric)], stage.NAME
