"""The one GPU table: per model its name markers, bf16 dense peak, NVLink and PCIe, and board kind.

    gpu = gpu_for("NVIDIA H100 80GB HBM3")   # → H100 SXM: 989.4 TFLOP/s, NVLink 4 × 18, PCIe Gen5, switch
                                             # boards
    gpu_for("NVIDIA H100 NVL").model        # → "H100 NVL" (PCIe card with NVLink bridges, not SXM)

Matching, the one rule: the device name (torch.cuda.get_device_name(), `nvidia-smi -L`) is upper-cased
and split into words at every character that is not a letter or digit ("NVIDIA A100-SXM4-80GB" →
NVIDIA, A100, SXM4, 80GB); an entry matches when every one of its markers is one of those words,
and the first matching entry in table order wins. Whole words keep "B200" out of "GB200", "A10" out
of "A100" and "L4" out of "L40S"; the more specific form factor (H100 NVL, H100 PCIe) is listed
before the model's SXM default, and tests/unit/test_gpus.py proves no entry can shadow a later one.

Datasheets quote bf16 "with sparsity" (2:4 structured sparsity doubles the figure); a dense training
step can reach only the dense figure, half of it. Each entry keeps the datasheet's number and says so.
A GPU not in the table gets no peak (None), never a guess.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

# Per direction, GB/s (1e9 bytes), from /work/shared/CHECKLIST.md's link peaks.
NVLINK_PER_LINK_GBps = {1: 20.0, 2: 25.0, 3: 25.0, 4: 25.0, 5: 50.0}
NVLINK_SOURCE = {
    1: "NVIDIA Tesla P100 whitepaper: 4 NVLink 1.0 links, 160 GB/s bidirectional (20 GB/s per link per "
    "direction)",
    2: "CHECKLIST.md: NVLink 2 (V100) 25 GB/s per link",
    3: "CHECKLIST.md: NVLink 3 (A100) 25 GB/s per link",
    4: "CHECKLIST.md: NVLink 4 (H100/H200) 25 GB/s per link",
    5: "CHECKLIST.md: NVLink 5 (B200) 50 GB/s per link",
}
PCIE_X16_GBps = {3: 15.75, 4: 31.5, 5: 63.0}
"""Per direction, one x16 link; a narrower link scales by lanes/16 (CHECKLIST.md: Gen3 15.75, Gen4 31.5, Gen5
63)."""


@dataclass(frozen=True)
class Gpu:
    model: str
    """The GPU model and form factor the figures belong to."""
    markers: tuple[str, ...]
    """Words that must all appear in the upper-cased device name."""
    examples: tuple[str, ...]
    """Device names as torch / nvidia-smi print them, each matched to this entry (tested)."""
    bf16_dense_tflops: float | None
    """Dense (no sparsity) bf16 tensor-core peak, TFLOP/s; None where the table has no datasheet figure."""
    peak_source: str
    nvlink: int | None = None
    """NVLink generation; None for a card without NVLink."""
    nvlink_links: int | None = None
    """NVLinks per GPU (all of them, as on a switched board)."""
    pcie_gen: int | None = None
    switch_boards_only: bool = False
    """Ships only on boards that put every GPU pair on NVLink (NVSwitch, or a 4-GPU HGX full mesh)."""
    memory_GBps: float | None = None
    """The datasheet's HBM/GDDR bandwidth, GB/s (1e9 bytes, reads and writes together); None where the table
    has no single figure (an entry covering two memory sizes of different bandwidth, a part without a public
    datasheet)."""
    memory_source: str = "no memory bandwidth figure in this table"

    @property
    def bf16_dense_flops(self) -> float | None:
        return None if self.bf16_dense_tflops is None else self.bf16_dense_tflops * 1e12

    @property
    def nvlink_per_link_GBps(self) -> float | None:
        return NVLINK_PER_LINK_GBps.get(self.nvlink) if self.nvlink else None

    @property
    def nvlink_full_GBps(self) -> float | None:
        """Per direction over all of the GPU's NVLinks: what a switched board gives one GPU."""
        rate = self.nvlink_per_link_GBps
        return rate * self.nvlink_links if rate and self.nvlink_links else None

    @property
    def pcie_x16_GBps(self) -> float | None:
        return PCIE_X16_GBps.get(self.pcie_gen) if self.pcie_gen else None


def _sparse(sheet: str, model: str, sparse: str, dense: float) -> str:
    """The source line for a figure the datasheet gives with sparsity: its number, then the dense half."""
    return f"NVIDIA {sheet} datasheet: {model} BF16 {sparse} TFLOPS with sparsity → {dense:,g} dense"


GPUS: tuple[Gpu, ...] = (
    # Blackwell. "B200" is not a word of "NVIDIA GB200": GB200 gets its own (1,200 W) figure, not B200's.
    Gpu(
        "GB200",
        ("GB200",),
        ("NVIDIA GB200",),
        2500.0,
        "NVIDIA GB200 NVL72 datasheet, individual Blackwell GPU: FP16/BF16 Tensor Core 5 PFLOPS with "
        "sparsity "
        "at its configurable 1,200 W → 2,500 dense",
        5,
        18,
        None,
        True,
    ),
    Gpu(
        "B200 (HGX)",
        ("B200",),
        ("NVIDIA B200",),
        2250.0,
        "NVIDIA HGX B200 datasheet: FP16/BF16 4.5 PFLOPS with sparsity per GPU → 2,250 dense",
        5,
        18,
        5,
        True,
    ),
    Gpu("GB300", ("GB300",), ("NVIDIA GB300",), None, "no datasheet figure in this table", 5, 18, None, True),
    Gpu(
        "B300", ("B300",), ("NVIDIA B300 SXM6 AC",), None, "no datasheet figure in this table", 5, 18, 5, True
    ),
    # Hopper: the PCIe cards (NVL = NVLink-bridged pairs) before the SXM default.
    Gpu(
        "H200 NVL",
        ("H200", "NVL"),
        ("NVIDIA H200 NVL",),
        835.5,
        _sparse("H200", "H200 NVL", "1,671", 835.5),
        4,
        18,
        5,
    ),
    Gpu(
        "H200 SXM",
        ("H200",),
        ("NVIDIA H200",),
        989.4,
        _sparse("H200", "H200 SXM", "1,979", 989.4),
        4,
        18,
        5,
        True,
    ),
    Gpu(
        "H100 NVL",
        ("H100", "NVL"),
        ("NVIDIA H100 NVL",),
        835.5,
        _sparse("H100", "H100 NVL", "1,671", 835.5),
        4,
        12,
        5,
    ),
    Gpu(
        "H100 PCIe",
        ("H100", "PCIE"),
        ("NVIDIA H100 PCIe",),
        756.5,
        _sparse("H100", "H100 PCIe", "1,513", 756.5),
        4,
        12,
        5,
    ),
    Gpu(
        "H100 SXM",
        ("H100",),
        ("NVIDIA H100 80GB HBM3", "NVIDIA H100"),
        989.4,
        _sparse("H100", "H100 SXM", "1,979", 989.4),
        4,
        18,
        5,
        True,
    ),
    Gpu(
        "H800 PCIe",
        ("H800", "PCIE"),
        ("NVIDIA H800 PCIe",),
        None,
        "no datasheet figure in this table",
        4,
        None,
        5,
    ),
    Gpu(
        "H800 SXM",
        ("H800",),
        ("NVIDIA H800",),
        989.4,
        _sparse("H800", "H800 SXM", "1,979", 989.4),
        4,
        8,
        5,
        True,
    ),
    # Grace Hopper: alone, or four per node on an NV6 full mesh (capture 35's layout)
    Gpu(
        "GH200",
        ("GH200",),
        ("NVIDIA GH200 480GB", "NVIDIA GH200 120GB"),
        989.5,
        _sparse("GH200 Grace Hopper Superchip", "H100 (GH200)", "1,979", 989.5),
        4,
        18,
        None,
    ),
    Gpu(
        "H20",
        ("H20",),
        ("NVIDIA H20",),
        None,
        "no public NVIDIA datasheet (a China-market part): no peak, never a "
        "guess; its peak checks are INCONCLUSIVE",
        4,
        18,
        5,
        True,
    ),
    # Ampere: PCIe cards take NVLink bridges (NV12 pairs); SXM4 boards are switched or fully meshed.
    Gpu(
        "A100 PCIe",
        ("A100", "PCIE"),
        ("NVIDIA A100-PCIE-40GB", "NVIDIA A100 80GB PCIe"),
        312.0,
        "NVIDIA A100 datasheet: BF16 Tensor Core 312 TFLOPS (624 with sparsity), SXM and PCIe",
        3,
        12,
        4,
    ),
    Gpu(
        "A100 SXM",
        ("A100",),
        ("NVIDIA A100-SXM4-80GB", "NVIDIA A100-SXM4-40GB"),
        312.0,
        "NVIDIA A100 datasheet: BF16 Tensor Core 312 TFLOPS (624 with sparsity), SXM and PCIe",
        3,
        12,
        4,
        True,
    ),
    Gpu(
        "A800 PCIe",
        ("A800", "PCIE"),
        ("NVIDIA A800 80GB PCIe",),
        312.0,
        "NVIDIA A800 datasheet: BF16 Tensor Core 312 TFLOPS (624 with sparsity)",
        3,
        None,
        4,
    ),
    Gpu(
        "A800 SXM",
        ("A800",),
        ("NVIDIA A800-SXM4-80GB",),
        312.0,
        "NVIDIA A800 datasheet: BF16 Tensor Core 312 TFLOPS (624 with sparsity); NVLink 400 GB/s (8 links)",
        3,
        8,
        4,
        True,
    ),
    # Volta and Pascal: SXM2 boards are meshes (DGX-1's hybrid cube), SXM3 is DGX-2's NVSwitch.
    Gpu(
        "V100 SXM3", ("V100", "SXM3"), ("Tesla V100-SXM3-32GB",), None, "no bf16 tensor cores", 2, 6, 3, True
    ),
    Gpu(
        "V100 PCIe", ("V100", "PCIE"), ("Tesla V100-PCIE-16GB",), None, "no bf16 tensor cores", None, None, 3
    ),
    Gpu(
        "V100 SXM2",
        ("V100",),
        ("Tesla V100-SXM2-16GB", "Tesla V100-SXM2-32GB"),
        None,
        "no bf16 tensor cores",
        2,
        6,
        3,
    ),
    Gpu(
        "P100 PCIe", ("P100", "PCIE"), ("Tesla P100-PCIE-16GB",), None, "no bf16 tensor cores", None, None, 3
    ),
    Gpu("P100 SXM2", ("P100",), ("Tesla P100-SXM2-16GB",), None, "no bf16 tensor cores", 1, 4, 3),
    # PCIe-only cards.
    Gpu(
        "L40S",
        ("L40S",),
        ("NVIDIA L40S",),
        362.05,
        _sparse("L40S", "Tensor Core", "733", 362.05),
        None,
        None,
        4,
    ),
    Gpu(
        "L40",
        ("L40",),
        ("NVIDIA L40",),
        181.05,
        _sparse("L40", "Tensor Core", "362.1", 181.05),
        None,
        None,
        4,
    ),
    Gpu("L4", ("L4",), ("NVIDIA L4",), 121.0, _sparse("L4", "Tensor Core", "242", 121), None, None, 4),
    Gpu(
        "A10G",
        ("A10G",),
        ("NVIDIA A10G",),
        None,
        "no NVIDIA datasheet: AWS's A10 variant (g5 instances) is "
        "published with no bf16 tensor figure; its GEMM peak check is INCONCLUSIVE, never A10's 125",
        None,
        None,
        4,
    ),
    Gpu(
        "A10",
        ("A10",),
        ("NVIDIA A10",),
        125.0,
        "NVIDIA A10 datasheet: BF16 Tensor Core 125 TFLOPS (250 with sparsity)",
        None,
        None,
        4,
    ),
    Gpu(
        "RTX 6000 Ada",
        ("RTX", "6000", "ADA"),
        ("NVIDIA RTX 6000 Ada Generation",),
        364.2,
        "NVIDIA Ada Lovelace architecture whitepaper: RTX 6000 Ada peak BF16 tensor TFLOPS with FP32 "
        "accumulate 364.2 "
        "(728.5 with sparsity)",
        None,
        None,
        4,
    ),
    Gpu(
        "GeForce RTX 5090",
        ("RTX", "5090"),
        ("NVIDIA GeForce RTX 5090",),
        None,
        "no bf16-with-FP32-accumulate figure at hand: the published 838 TFLOPS FP16 tensor is sparse with "
        "FP16 "
        "accumulate (GeForce halves FP32 accumulate); no peak, never a guess",
        None,
        None,
        5,
    ),
    Gpu(
        "GeForce RTX 4090",
        ("RTX", "4090"),
        ("NVIDIA GeForce RTX 4090",),
        165.2,
        "NVIDIA Ada Lovelace architecture whitepaper: RTX 4090 peak BF16 tensor TFLOPS with FP32 accumulate "
        "165.2 "
        "(330.4 with sparsity)",
        None,
        None,
        4,
    ),
    Gpu("T4", ("T4",), ("Tesla T4",), None, "no bf16 tensor cores", None, None, 3),
    Gpu("P4", ("P4",), ("Tesla P4",), None, "no bf16 tensor cores", None, None, 3),
)

MEMORY_GBps: dict[str, tuple[float, str]] = {
    "GB200": (8000.0, "NVIDIA GB200 NVL72 datasheet: 186 GB HBM3e at 8 TB/s per GPU"),
    "B200 (HGX)": (8000.0, "NVIDIA HGX B200 datasheet: 64 TB/s of HBM3e over 8 GPUs, 8 TB/s each"),
    "H200 NVL": (4800.0, "NVIDIA H200 datasheet: H200 NVL 141 GB HBM3e, 4.8 TB/s"),
    "H200 SXM": (4800.0, "NVIDIA H200 datasheet: H200 SXM 141 GB HBM3e, 4.8 TB/s"),
    "H100 NVL": (3900.0, "NVIDIA H100 datasheet: H100 NVL 94 GB, 3.9 TB/s"),
    "H100 PCIe": (2000.0, "NVIDIA H100 datasheet: H100 PCIe 80 GB, 2 TB/s"),
    "H100 SXM": (3350.0, "NVIDIA H100 datasheet: H100 SXM 80 GB, 3.35 TB/s"),
    "H800 SXM": (3350.0, "NVIDIA H800 datasheet: H800 SXM 80 GB, 3.35 TB/s"),
    "L40S": (864.0, "NVIDIA L40S datasheet: 48 GB GDDR6, 864 GB/s"),
    "L40": (864.0, "NVIDIA L40 datasheet: 48 GB GDDR6, 864 GB/s"),
    "L4": (300.0, "NVIDIA L4 datasheet: 24 GB GDDR6, 300 GB/s"),
    "A10": (600.0, "NVIDIA A10 datasheet: 24 GB GDDR6, 600 GB/s"),
    "RTX 6000 Ada": (960.0, "NVIDIA RTX 6000 Ada datasheet: 48 GB GDDR6, 960 GB/s"),
    "GeForce RTX 4090": (
        1008.0,
        "NVIDIA Ada Lovelace architecture whitepaper: RTX 4090 24 GB GDDR6X, 1,008 GB/s",
    ),
    "V100 SXM2": (900.0, "NVIDIA V100 datasheet: V100 SXM2 16/32 GB HBM2, 900 GB/s"),
    "V100 PCIe": (900.0, "NVIDIA V100 datasheet: V100 PCIe 16/32 GB HBM2, 900 GB/s"),
    "T4": (320.0, "NVIDIA T4 datasheet: 16 GB GDDR6, 320 GB/s"),
}
"""Per table model: the datasheet memory bandwidth and its line. Not here: A100, A800 and GH200, each sold
with two memory sizes of different bandwidth under one entry (SIZED_MEMORY_GBps below: the card's memory size
picks), and H20, A10G and the parts marked with no datasheet figure above."""
GPUS = tuple(
    replace(g, memory_GBps=MEMORY_GBps[g.model][0], memory_source=MEMORY_GBps[g.model][1])
    if g.model in MEMORY_GBps
    else g
    for g in GPUS
)

SIZED_MEMORY_GBps: dict[str, tuple[tuple[float | None, float, str], ...]] = {
    "A100 PCIe": (
        (48, 1555.0, "NVIDIA A100 datasheet: A100 40GB PCIe HBM2, 1,555 GB/s"),
        (None, 1935.0, "NVIDIA A100 datasheet: A100 80GB PCIe HBM2e, 1,935 GB/s"),
    ),
    "A100 SXM": (
        (48, 1555.0, "NVIDIA A100 datasheet: A100 40GB SXM HBM2, 1,555 GB/s"),
        (None, 2039.0, "NVIDIA A100 datasheet: A100 80GB SXM HBM2e, 2,039 GB/s"),
    ),
    "A800 PCIe": (
        (48, 1555.0, "NVIDIA A800 datasheet: A800 40GB PCIe HBM2, 1,555 GB/s"),
        (None, 1935.0, "NVIDIA A800 datasheet: A800 80GB PCIe HBM2e, 1,935 GB/s"),
    ),
    "A800 SXM": ((None, 2039.0, "NVIDIA A800 datasheet: A800 80GB SXM HBM2e, 2,039 GB/s"),),
    "GH200": (
        (110, 4000.0, "NVIDIA GH200 datasheet: 96 GB HBM3, 4 TB/s"),
        (None, 4900.0, "NVIDIA GH200 datasheet: 144 GB HBM3e, 4.9 TB/s"),
    ),
}
"""The models sold with two memory sizes of different bandwidth under one entry: (at most this many GB, GB/s,
source), smallest first; the card's own memory size picks the line (memory_bandwidth)."""
SIZE_IN_NAME = {"A100 PCIe", "A100 SXM", "A800 PCIe", "A800 SXM"}
"""Where the device name's `40GB`/`80GB` is the HBM size (GH200's `480GB` is its LPDDR5X: only the reported
memory tells its HBM)."""
_NAMED_GB = re.compile(r"(?<![0-9])(\d{2,3})GB\b")
_WORD = re.compile(r"[A-Z0-9]+")


def words(device_name: str) -> set[str]:
    """The upper-cased words of a device name: 'NVIDIA A100-SXM4-80GB' → {NVIDIA, A100, SXM4, 80GB}."""
    return set(_WORD.findall(device_name.upper()))


def memory_bandwidth(
    gpu: Gpu | None, device_name: str | None = None, memory_bytes: int | None = None
) -> tuple[float, str] | None:
    """(datasheet memory GB/s, its source) for this card: the table's figure, or for a model listed in
    SIZED_MEMORY_GBps the line its memory size picks (the memory nvidia-smi reports, else a `40GB` in the
    name); None when nothing says."""
    if gpu is None:
        return None
    if gpu.memory_GBps:
        return gpu.memory_GBps, gpu.memory_source
    lines = SIZED_MEMORY_GBps.get(gpu.model)
    named = _NAMED_GB.search((device_name or "").upper()) if gpu.model in SIZE_IN_NAME else None
    size_gb = memory_bytes / 2**30 if memory_bytes else float(named.group(1)) if named else None
    if not lines or size_gb is None:
        return None
    rate, source = next((rate, source) for top, rate, source in lines if top is None or size_gb <= top)
    return rate, f"{source} (the line for its {size_gb:.0f} GB of memory)"


def gpu_for(device_name: str | None) -> Gpu | None:
    """The table entry for a device name (first entry whose markers are all words of it); None if unknown."""
    if not device_name:
        return None
    have = words(device_name)
    return next((g for g in GPUS if all(m in have for m in g.markers)), None)
