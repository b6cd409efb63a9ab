"""Each sized stage's footprint on every GPU of suite/hardware/gpus.py, held under the card's memory (suite/hardware/card_fit.py).

The card memories below are the smallest SKU's datasheet capacity (GB = 1e9 bytes), taken at 93% so that the
figure is below what `nvidia-smi -q` reports as FB Memory Total on every real card (a 24 GB A10G reports
23028 MiB = 24.1e9 B; 0.93 × 24e9 = 22.3e9): the test holds the stages to less than the cards have.
Sources: NVIDIA's datasheets for each part (GB200/GB300 NVL72: 13.4 TB / 20.7 TB HBM3e over 72 GPUs; HGX B200
1.44 TB and HGX B300 2.3 TB over 8; H200 141 GB; H100 NVL 94 GB; H100 80 GB; GH200 96 GB HBM3 (its 480 GB is
the Grace CPU's LPDDR5X with it); H20 96 GB; A100 and A800 40 GB (PCIe and SXM4 40GB SKUs); V100 16/32 GB;
P100 PCIe 12 GB; L40S/L40 48 GB; L4 24 GB; A10 24 GB; RTX 6000 Ada 48 GB; GeForce RTX 5090 32 GB and 4090 24 GB; T4 16 GB; P4 8 GB).
A10G (AWS G5, 24 GB: aws.amazon.com/ec2/instance-types/g5) is not in suite/hardware/gpus.py here: it is added to the table.
"""

import pytest

from suite.hardware import card_fit
from suite.config import NCCL_GPU
from suite.costmodel.sizing import parameter_count
from suite.hardware.gpus import GPUS
from suite.workloads.collective_sweep import COLLECTIVES, FREE_SHARE, RESERVE_BYTES, fit_to_memory

from .test_bandwidth_crossover_stages import DATA as NCCL_DATA

CARD_GB = {"GB200": 186, "B200 (HGX)": 180, "GB300": 288, "B300": 288, "H200 NVL": 141, "H200 SXM": 141,
           "H100 NVL": 94, "H100 PCIe": 80, "H100 SXM": 80, "H800 PCIe": 80, "H800 SXM": 80, "GH200": 96,
           "H20": 96, "A100 PCIe": 40, "A100 SXM": 40, "A800 PCIe": 40, "A800 SXM": 80, "V100 SXM3": 32,
           "V100 PCIe": 16, "V100 SXM2": 16, "P100 PCIe": 12, "P100 SXM2": 16, "L40S": 48, "L40": 48, "L4": 24,
           "A10": 24, "A10G": 24, "GeForce RTX 5090": 32, "RTX 6000 Ada": 48, "GeForce RTX 4090": 24, "T4": 16, "P4": 8}
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
    assert top * NCCL_GPU.sweep.factor > card_fit.usable_bytes(card(model)) // 3 or top == NCCL_GPU.sweep.max_bytes
    assert "send + receive + expected" in basis and f"-e {top} B" in basis


def test_a_24_gb_card_runs_nccl_tests_to_4_gib_and_says_why():
    top, basis = card_fit.nccl_tests_max_bytes(NCCL_GPU.sweep, card("GeForce RTX 4090"))
    assert top == 4 << 30 and "would need 24 GiB" in basis  # -e 8G: 3 × 8 GiB on a 24 GB card, the reported OOM
    assert card_fit.nccl_tests_max_bytes(NCCL_GPU.sweep, card("H100 SXM"))[0] == 8 << 30  # 80 GB keeps -e 8G
    assert card_fit.nccl_tests_max_bytes(NCCL_GPU.sweep, card("A100 SXM"))[0] == 8 << 30  # 40 GB: 24 GiB of 31
    assert card_fit.nccl_tests_max_bytes(NCCL_GPU.sweep, None) == (NCCL_GPU.sweep.max_bytes,
                                                                    "the card's memory is not known: the profile's -e unchanged")


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
    """tp, dp, zero, baseline at degree 1 train the profile's model whole on one GPU: the memory stage's
    formula (16Ψ state, its activations per block) plus the logits (bf16, and fp32 for the loss)."""
    m = NCCL_GPU.model
    logits = m.batch * m.seq_len * m.vocab * (2 + 4)
    need = card_fit.training_bytes(parameter_count(m), seq=m.seq_len, batch=m.batch, hidden=m.hidden, heads=m.heads,
                                   layers=m.layers) + logits
    assert need <= card_fit.usable_bytes(card(model)), (need / 2**30, card_fit.usable_bytes(card(model)) / 2**30)


def test_the_card_is_read_from_nvidia_smi_q():
    data = NCCL_DATA.parent / "smi"
    assert card_fit.memory_from_query((data / "h200-550-q.txt").read_text()) == 143771 << 20
    assert card_fit.memory_from_query((data / "a100-sxm4-525-q-one-process.txt").read_text()) == 81920 << 20
    assert card_fit.memory_from_query("Driver Version : 550\n") is None
    assert card_fit.card_bytes({"topology": {"gpu_memory_bytes": 1 << 34}}) == 1 << 34
    assert card_fit.card_bytes({}) is None


def test_the_nccl_tests_sweep_runs_the_binaries_at_the_cards_e(tmp_path, monkeypatch):
    from suite.cluster import nccl_tests as _nccl_tests

    from .test_bandwidth_crossover_stages import FOUR, FakeContext, stand_in, stand_in_mpirun

    bins, raw, tools = tmp_path / "build", tmp_path / "raw", tmp_path / "tools"
    bins.mkdir(), raw.mkdir(), tools.mkdir()
    stand_in(bins, "all_reduce_perf", "15-rtx4090-all_reduce-4gpu-pcie-docker.txt")  # a 4 × RTX 4090 box's run
    stand_in_mpirun(tools)
    monkeypatch.setenv(_nccl_tests.DIR_ENV, str(tmp_path))
    monkeypatch.setenv("PATH", f"{tools}:/usr/bin:/bin")
    ctx = FakeContext(raw)
    ctx.facts = {"topology": {"gpu_memory_bytes": 24564 << 20}}  # what its nvidia-smi -q says: 24564 MiB
    rows = _nccl_tests.sweep(FOUR, ctx, ["all_reduce"])
    args = (bins / "all_reduce_perf.args").read_text().split("\n")[0].split()
    assert args[args.index("-e") + 1] == str(4 << 30)
    status = next(r.text for r in rows if r.metric == "status")
    assert "sized: -e 4294967296 B: send + receive + expected buffers" in status and "would need 24 GiB" in status
