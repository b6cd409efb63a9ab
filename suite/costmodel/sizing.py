"""The GPT model's size and cost, as arithmetic on its configuration (no torch: stages' expect() runs in the
runner's own process, which stays free of torch). suite/workloads/gpt.py re-exports both functions."""

from __future__ import annotations

from ..config import GptConfig


def parameter_count(cfg: GptConfig) -> int:
    """Parameters of the model (the head counted once when tied)."""
    d, f = cfg.hidden, cfg.mlp_ratio * cfg.hidden
    block = 4 * d * d + 2 * d * f + 2 * 2 * d  # q, k, v, o; up, down; two LayerNorms (weight and bias)
    head = 0 if cfg.tied_head else cfg.vocab * d
    return cfg.vocab * d + cfg.layers * block + 2 * d + head


def training_flops_per_token(cfg: GptConfig) -> float:
    """6N for the matmuls of forward and backward plus 12·L·d·T for attention scores (PaLM's accounting)."""
    return 6 * parameter_count(cfg) + 12 * cfg.layers * cfg.hidden * cfg.seq_len
