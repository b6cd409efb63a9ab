"""The burn-in's GEMM chain and its bit-for-bit comparison: seeded inputs, the chain, digests, the first
difference.

    a, bs = chain_inputs(n=8192, links=4, seed=1234, dtype=torch.bfloat16, device=cuda0)   # the same on every
                                                                                           # GPU
    out = run_chain(a, bs)                       # a @ b0 @ b1 @ b2 @ b3, each factor scaled to keep entries
                                                 # ~N(0, 1)
    digest(out)                                  # two int64 sums of the raw bits: any single flipped bit
                                                 # changes the first
    first_difference(out, reference)             # (flat index, row, col, bits here, bits there) or None

Same inputs, same kernel, same bits: cuBLAS documents bit-wise identical results run to run for a given
toolkit on GPUs of the same architecture and SM count, provided the algorithm does not change between calls.
What can change it is set by `deterministic_settings` (called before the first GEMM): TF32 off (an fp32 chain
means fp32 arithmetic; TF32 would still be reproducible, but it is not the fp32 the row claims),
`torch.use_deterministic_algorithms`, and `CUBLAS_WORKSPACE_CONFIG=:4096:8` (cuBLAS's own condition for
reproducibility when its workspace could differ between streams; the stage sets it in the workers'
environment, before CUDA starts). On CPU ranks one thread per rank (the launcher's OMP_NUM_THREADS=1) and the
same instruction set give identical bits too; the rehearsal and tests/dist/test_burnin_sdc.py check that they
do. GPUs of different models (or a MIG slice beside a full GPU) are not expected to agree: the stage compares
bits only where the ranks report one model.
"""

from __future__ import annotations

import math
import os

import torch

BITS_VIEW = {torch.bfloat16: torch.int16, torch.float16: torch.int16, torch.float32: torch.int32}
"""The integer type of the same width each float result is reinterpreted as, to compare raw bits."""
WORKSPACE_CONFIG = ":4096:8"


def deterministic_settings() -> str:
    """Fix what could make the same GEMM give other bits; returns the settings, said once for the rows."""
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", WORKSPACE_CONFIG)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.use_deterministic_algorithms(True)
    return (
        f"CUBLAS_WORKSPACE_CONFIG={os.environ['CUBLAS_WORKSPACE_CONFIG']}, "
        "torch.use_deterministic_algorithms(True), allow_tf32=False, "
        f"threads={torch.get_num_threads()}"
    )


def chain_inputs(
    n: int, links: int, seed: int, dtype: torch.dtype, device: torch.device
) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """The chain's start and its factors, drawn on the CPU from `seed` (one stream for every GPU), then moved.

    Each factor is N(0, 1/n): a product with it keeps the entries of an N(0, 1) matrix near N(0, 1), so a long
    chain neither overflows bf16 nor flushes to zero."""
    gen = torch.Generator().manual_seed(seed)
    a = torch.randn(n, n, generator=gen, dtype=torch.float32)
    bs = [torch.randn(n, n, generator=gen, dtype=torch.float32) / math.sqrt(n) for _ in range(links)]
    return a.to(device=device, dtype=dtype), [b.to(device=device, dtype=dtype) for b in bs]


def run_chain(a: torch.Tensor, bs: list[torch.Tensor]) -> torch.Tensor:
    """a @ b0 @ b1 ... left to right: every product depends on the one before (no two GEMMs can be merged)."""
    x = a
    for b in bs:
        x = torch.mm(x, b)
    return x


def chain_flops(n: int, links: int) -> float:
    return 2.0 * n**3 * links


def bits(t: torch.Tensor) -> torch.Tensor:
    """The raw bits of a float tensor as integers of the same width (a view, no copy)."""
    return t.view(BITS_VIEW[t.dtype])


def digest(t: torch.Tensor) -> torch.Tensor:
    """[sum of the bits, row-weighted sum of the bits] as int64, on t's device.

    A single flipped bit changes one element's integer by ±2^k (k < 32) and so the plain sum by a nonzero
    amount below 2^63; the row-weighted sum catches two flips that cancel in the plain sum unless they share a
    row. Integer sums wrap modulo 2^64 whatever the reduction order, so equal bits always give equal
    digests."""
    as_int = bits(t).to(torch.int64)
    rows = as_int.sum(dim=1)
    weights = torch.arange(1, rows.numel() + 1, device=t.device, dtype=torch.int64)
    return torch.stack([rows.sum(), (rows * weights).sum()])


def first_difference(here: torch.Tensor, there: torch.Tensor) -> tuple[int, int, int, int, int] | None:
    """(flat index, row, column, bits here, bits there) of the first element whose bits differ; None when none
    do."""
    a, b = bits(here), bits(there)
    differ = (a != b).flatten().nonzero()
    if differ.numel() == 0:
        return None
    flat = int(differ[0, 0])
    cols = here.shape[1]
    mask = (1 << (8 * here.element_size())) - 1
    return (flat, flat // cols, flat % cols, int(a.flatten()[flat]) & mask, int(b.flatten()[flat]) & mask)


def flip_bit(t: torch.Tensor, flat_index: int, bit: int) -> None:
    """Flip one bit of one element in place: the injected silent data corruption the comparison must name."""
    view = bits(t).view(-1)
    width = 8 * t.element_size()
    if not 0 <= bit < width:
        raise ValueError(f"bit {bit} is outside a {width}-bit element")
    mask = 1 << bit
    if mask >= 1 << (width - 1):  # the sign bit: as a signed integer of this width
        mask -= 1 << width
    view[flat_index] = view[flat_index] ^ mask


def describe(diff: tuple[int, int, int, int, int], width_bits: int) -> str:
    flat, row, col, mine, theirs = diff
    digits = width_bits // 4
    return (
        f"element [{row}, {col}] (flat {flat}): bits 0x{mine:0{digits}x} here, 0x{theirs:0{digits}x} in the "
        f"reference (xor 0x{mine ^ theirs:0{digits}x})"
    )
