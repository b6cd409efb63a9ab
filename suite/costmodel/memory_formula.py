"""The memory budget of training the GPT model (suite/workloads/gpt.py) on one device, as formulas.

Pure arithmetic (make plan and expect() import no torch). The memory stage measures every term.

Model state, mixed-precision AdamW as the memory stage trains it (fp32 parameters, autocast to bf16):
  parameters 4Ψ + gradients 4Ψ + AdamW's exp_avg and exp_avg_sq 8Ψ = 16Ψ bytes (Ψ parameters). The ZeRO
  paper's split (2Ψ bf16 weights + 2Ψ bf16 gradients + 12Ψ fp32 master copy and moments) has the same total.

Activations saved for backward per decoder block, bytes, derived op by op for this block under bf16 autocast
(s tokens per sequence, b sequences, h hidden, a heads; the residual stream stays fp32):
  attn LayerNorm input (fp32)               4sbh    mlp LayerNorm input (fp32)           4sbh
  q, k, v Linear inputs (3 bf16 casts)      6sbh    up Linear input (bf16)               2sbh
  SDPA's q, k (after RoPE) and v (bf16)     6sbh    GELU input (bf16, 4h wide)           8sbh
  SDPA output (bf16)                        2sbh    down Linear input (bf16, 4h wide)    8sbh
  o Linear input (bf16, reshaped copy)      2sbh
  = 42·s·b·h, plus LayerNorm mean/rstd 16·s·b, SDPA's log-sum-exp (fp32) 4·a·s·b, the RoPE cos/sin tables
  (fp32) 4·s·h/a, and the bf16 copies of the block's six weight matrices that autocast keeps for backward
  24·h². Measured with torch's MemTracker on CPU it is exact (448,512 B for s=32, b=4, h=64, a=4).
  Korthikanti et al. (2022)'s s·b·h·(34 + 5·a·s/h) is for a different block (fp16 residual, dropout masks,
  the s×s attention scores kept): it is printed beside, not checked.
With activation checkpointing (torch.utils.checkpoint per block) a block keeps only its fp32 input: 4·s·b·h.
"""

from __future__ import annotations

STATE_BYTES_PER_PARAM = {"parameters": 4, "gradients": 4, "optimizer": 8}
"""Bytes per parameter of each part of the model state (fp32 parameters, fp32 gradients, AdamW's two
moments)."""
STATE_FORMULA = "16Ψ: parameters 4Ψ + gradients 4Ψ + AdamW moments 8Ψ (fp32 state, bf16 autocast)"
ACTIVATION_FORMULA = "42·s·b·h + 16·s·b + 4·a·s·b + 4·s·h/a + 24·h² per block (bf16 autocast, fp32 residual)"
CHECKPOINT_FORMULA = "4·s·b·h per block (its fp32 input) with torch.utils.checkpoint"


def state_bytes(params: int) -> dict[str, int]:
    """Each part of the model state, bytes, for `params` parameters."""
    return {part: per * params for part, per in STATE_BYTES_PER_PARAM.items()}


def activation_bytes_per_layer(s: int, b: int, h: int, a: int, checkpointed: bool = False) -> int:
    """Bytes one decoder block keeps for backward (see the module's derivation)."""
    if checkpointed:
        return 4 * s * b * h
    return 42 * s * b * h + 16 * s * b + 4 * a * s * b + 4 * s * (h // a) + 24 * h * h


def korthikanti_bytes_per_layer(s: int, b: int, h: int, a: int) -> float:
    """s·b·h·(34 + 5·a·s/h): Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer
    Models", for a GPT block with fp16 activations, dropout and the attention scores materialised."""
    return s * b * h * (34 + 5 * a * s / h)
