"""Dense bf16 tensor-core peak per GPU model, and model FLOPs utilisation (MFU) against it.

    peak = peak_for("NVIDIA H100 80GB HBM3")      # → GpuPeak(H100 SXM, 989.4 TFLOP/s, datasheet …)
    mfu(flops_per_token=3.42e9, tokens_per_s=1.2e5, peak_flops=peak.bf16_dense_flops)   # → 0.415

Datasheets quote bf16 "with sparsity" (2:4 structured sparsity doubles the figure); a dense
training step can only reach the dense figure, half of it. Each entry keeps the datasheet's
number and says so. A GPU not in the table gets no MFU (NaN), never a guessed peak.

Matching: torch.cuda.get_device_name() strings ("NVIDIA H100 80GB HBM3", "NVIDIA H100 PCIe",
"NVIDIA A100-SXM4-80GB", "NVIDIA GeForce RTX 4090") are upper-cased and searched for each
entry's markers in table order, so the more specific form factor (H100 NVL, H100 PCIe) comes
before the SXM default.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class GpuPeak:
    model: str
    """The GPU model and form factor the figure belongs to."""
    bf16_dense_tflops: float
    """Dense (no sparsity) bf16 tensor-core peak, TFLOP/s (1e12 FLOP/s)."""
    source: str
    """Where the figure comes from, with the datasheet's own number."""

    @property
    def bf16_dense_flops(self) -> float:
        """The peak in FLOP/s."""
        return self.bf16_dense_tflops * 1e12


# (markers that must all appear in the upper-cased device name, entry). First match wins.
PEAKS: tuple[tuple[tuple[str, ...], GpuPeak], ...] = (
    (("B200",), GpuPeak("B200 (HGX)", 2250.0,
                        "NVIDIA HGX B200 datasheet: FP16/BF16 4.5 PFLOPS with sparsity per GPU → 2.25 dense")),
    (("H200", "NVL"), GpuPeak("H200 NVL", 835.5,
                              "NVIDIA H200 datasheet: H200 NVL BF16 1,671 TFLOPS with sparsity → 835.5 dense")),
    (("H200",), GpuPeak("H200 SXM", 989.4,
                        "NVIDIA H200 datasheet: H200 SXM BF16 1,979 TFLOPS with sparsity → 989.4 dense")),
    (("H100", "NVL"), GpuPeak("H100 NVL", 835.5,
                              "NVIDIA H100 datasheet: H100 NVL BF16 1,671 TFLOPS with sparsity → 835.5 dense")),
    (("H100", "PCIE"), GpuPeak("H100 PCIe", 756.5,
                               "NVIDIA H100 datasheet: H100 PCIe BF16 1,513 TFLOPS with sparsity → 756.5 dense")),
    (("H100",), GpuPeak("H100 SXM", 989.4,
                        "NVIDIA H100 datasheet: H100 SXM BF16 1,979 TFLOPS with sparsity → 989.4 dense")),
    (("H800",), GpuPeak("H800 SXM", 989.4,
                        "NVIDIA H800 datasheet: BF16 1,979 TFLOPS with sparsity → 989.4 dense")),
    (("A100",), GpuPeak("A100", 312.0,
                        "NVIDIA A100 datasheet: BF16 Tensor Core 312 TFLOPS (624 with sparsity), SXM and PCIe")),
    (("A800",), GpuPeak("A800", 312.0,
                        "NVIDIA A800 datasheet: BF16 Tensor Core 312 TFLOPS (624 with sparsity)")),
    (("L40S",), GpuPeak("L40S", 362.05,
                        "NVIDIA L40S datasheet: BF16 Tensor Core 733 TFLOPS with sparsity → 362.05 dense")),
    (("L40",), GpuPeak("L40", 181.05,
                       "NVIDIA L40 datasheet: BF16 Tensor Core 362.1 TFLOPS with sparsity → 181.05 dense")),
    (("L4",), GpuPeak("L4", 121.0,
                      "NVIDIA L4 datasheet: BF16 Tensor Core 242 TFLOPS with sparsity → 121 dense")),
    (("A10",), GpuPeak("A10", 125.0,
                       "NVIDIA A10 datasheet: BF16 Tensor Core 125 TFLOPS (250 with sparsity)")),
    (("RTX 4090",), GpuPeak("GeForce RTX 4090", 165.2,
                            "NVIDIA Ada Lovelace architecture whitepaper: RTX 4090 peak BF16 tensor TFLOPS "
                            "with FP32 accumulate 165.2 (330.4 with sparsity)")),
)


def peak_for(device_name: str) -> GpuPeak | None:
    """The table entry for a torch.cuda.get_device_name() string; None for a GPU not in the table."""
    upper = device_name.upper()
    for markers, peak in PEAKS:
        if all(marker in upper for marker in markers):
            return peak
    return None


def mfu(flops_per_token: float, tokens_per_s: float, peak_flops: float) -> float:
    """Model FLOPs utilisation: achieved model FLOP/s ÷ peak FLOP/s (a fraction, not %).

    Achieved = FLOPs per trained token × tokens per second; e.g. 3.42 GFLOP/token × 120,000
    tokens/s = 410 TFLOP/s, ÷ 989.4 TFLOP/s = 0.415. NaN when the peak is unknown (≤ 0 or NaN).
    """
    if not peak_flops or math.isnan(peak_flops) or peak_flops <= 0:
        return float("nan")
    return flops_per_token * tokens_per_s / peak_flops
