"""The GPT model's size and cost, as arithmetic on its configuration (no torch: stages' expect() runs in the
runner's own process, which stays free of torch). suite/workloads/gpt.py re-exports both functions."""

from __future__ import annotations

from suite.config import GptConfig

FLOPS_FORMULA = (
    "6·(N − V·d) + 12·L·d·T FLOP per token (PaLM's accounting; the input embedding is a lookup, not a matmul)"
)


def parameter_count(cfg: GptConfig) -> int:
    """Parameters of the model (the head counted once when tied)."""
    d, f = cfg.hidden, cfg.mlp_ratio * cfg.hidden
    block = 4 * d * d + 2 * d * f + 2 * 2 * d  # q, k, v, o; up, down; two LayerNorms (weight and bias)
    head = 0 if cfg.tied_head else cfg.vocab * d
    return cfg.vocab * d + cfg.layers * block + 2 * d + head


def matmul_parameters(cfg: GptConfig) -> int:
    """Parameters that take part in a matmul per token: all but the input embedding's V·d, which is a row
    lookup.

    A tied head keeps its V·d: the shared matrix is multiplied by every token's hidden state at the output.
    """
    return parameter_count(cfg) - (0 if cfg.tied_head else cfg.vocab * cfg.hidden)


def flops_per_token(matmul_params: int, layers: int, attention_width: int, seq_len: int) -> float:
    """Training FLOPs per token: 6 per matmul parameter (2 forward, 4 backward) plus attention's scores and
    weighted sum, 12·L·(heads·head_dim)·T (PaLM, Chowdhery et al. 2022, appendix B: 6N + 12LHQT)."""
    return 6 * matmul_params + 12 * layers * attention_width * seq_len


def training_flops_per_token(cfg: GptConfig) -> float:
    """6·(N − V·d) + 12·L·d·T for this model (untied head kept; see FLOPS_FORMULA)."""
    return flops_per_token(matmul_parameters(cfg), cfg.layers, cfg.hidden, cfg.seq_len)
