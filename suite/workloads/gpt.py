"""The fixed GPT-style decoder every scaling stage trains: embedding, pre-norm blocks of causal
attention with rotary positions (RoPE) and a GELU MLP, a final norm and an output head.

    model = build_model(profile.model)                  # same weights on every rank: one seed
    tokens, targets = synthetic_batch(profile.model, step=0)

Sizes per profile (suite/config.py; parameter_count() and training_flops_per_token() in
suite/costmodel/sizing.py):
  gloo-cpu: d=32, 2 layers, 4 heads, seq 16, batch 8, vocab 256 → 41,280 parameters (untied head)
  nccl-gpu: d=2048, 8 layers, 16 heads, seq 1024, batch 8, vocab 32768 → 536,940,544 parameters
            (8 × (12d² + 4d) = 402.7 M in blocks + 2 × 32768 × 2048 = 134.2 M embedding and head);
            FLOPs per training token = 6·(N − V·d) + 12·L·d·T = 2.819 G + 0.201 G = 3.02 GFLOP
            (the input embedding is a lookup; the untied head is a matmul and stays counted);
            8 × 1024 = 8,192 tokens per step → 24.7 TFLOP per step: 25 ms at an H100's 989 TFLOP/s
            bf16 dense peak, ~62 ms at 40% MFU: tens of milliseconds per step on one card.

Layer names are the ones tensor parallelism shards: attn.q/k/v and mlp.up are column-parallel,
attn.o and mlp.down row-parallel. Attention reads its local head count from q's width, so the
same forward runs on a TP shard holding heads/tp heads.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from suite.config import GptConfig

# part of this module's interface

DTYPES = {
    "float32": torch.float32,
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
    "float64": torch.float64,
}


def torch_dtype(name: str) -> torch.dtype:
    return DTYPES[name]


def rope_tables(
    seq_len: int,
    head_dim: int,
    positions: torch.Tensor | None = None,
    base: float = 10000.0,
    device: torch.device | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin tables (seq, head_dim/2) for rotary embeddings at the given absolute positions."""
    if positions is None:
        positions = torch.arange(seq_len, device=device)
    inv_freq = 1.0 / (
        base ** (torch.arange(0, head_dim, 2, device=positions.device, dtype=torch.float32) / head_dim)
    )
    angles = positions.to(torch.float32)[:, None] * inv_freq[None, :]
    return angles.cos(), angles.sin()


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate pairs (x[2i], x[2i+1]) of x (batch, heads, seq, head_dim) by the position's angle."""
    x_even, x_odd = x[..., 0::2].float(), x[..., 1::2].float()
    rotated_even = x_even * cos - x_odd * sin
    rotated_odd = x_even * sin + x_odd * cos
    return torch.stack((rotated_even, rotated_odd), dim=-1).flatten(-2).to(x.dtype)


class Attention(nn.Module):
    def __init__(self, cfg: GptConfig):
        super().__init__()
        self.head_dim = cfg.hidden // cfg.heads
        self.q = nn.Linear(cfg.hidden, cfg.hidden, bias=False)
        self.k = nn.Linear(cfg.hidden, cfg.hidden, bias=False)
        self.v = nn.Linear(cfg.hidden, cfg.hidden, bias=False)
        self.o = nn.Linear(cfg.hidden, cfg.hidden, bias=False)

    def forward(self, x: torch.Tensor, positions: torch.Tensor | None = None) -> torch.Tensor:
        batch, seq, _ = x.shape
        # -1 heads: under tensor parallelism q/k/v hold only this rank's heads.
        q = self.q(x).view(batch, seq, -1, self.head_dim).transpose(1, 2)
        k = self.k(x).view(batch, seq, -1, self.head_dim).transpose(1, 2)
        v = self.v(x).view(batch, seq, -1, self.head_dim).transpose(1, 2)
        cos, sin = rope_tables(seq, self.head_dim, positions, device=x.device)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.o(y.transpose(1, 2).reshape(batch, seq, -1))


class MLP(nn.Module):
    def __init__(self, cfg: GptConfig):
        super().__init__()
        self.up = nn.Linear(cfg.hidden, cfg.mlp_ratio * cfg.hidden, bias=False)
        self.down = nn.Linear(cfg.mlp_ratio * cfg.hidden, cfg.hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(F.gelu(self.up(x)))


class Block(nn.Module):
    def __init__(self, cfg: GptConfig):
        super().__init__()
        self.attn_norm = nn.LayerNorm(cfg.hidden)
        self.attn = Attention(cfg)
        self.mlp_norm = nn.LayerNorm(cfg.hidden)
        self.mlp = MLP(cfg)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.attn_norm(x))
        return x + self.mlp(self.mlp_norm(x))


class GPT(nn.Module):
    def __init__(self, cfg: GptConfig):
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab, cfg.hidden)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.layers))
        self.norm = nn.LayerNorm(cfg.hidden)
        self.head = nn.Linear(cfg.hidden, cfg.vocab, bias=False)
        if cfg.tied_head:
            self.head.weight = self.embed.weight

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


def init_weights(model: GPT, seed: int) -> None:
    """Deterministic initialisation from one seed: identical weights on every rank, whatever its RNG did
    before."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in sorted(model.named_parameters(), key=lambda kv: kv[0]):
            if name.endswith("norm.weight") or ".attn_norm.weight" in name or ".mlp_norm.weight" in name:
                p.fill_(1.0)
            elif name.endswith(".bias"):
                p.zero_()
            else:
                std = (
                    0.02 / math.sqrt(2 * model.cfg.layers)
                    if name.endswith(("o.weight", "down.weight"))
                    else 0.02
                )
                p.copy_(torch.randn(p.shape, generator=gen, dtype=torch.float32) * std)


def build_model(cfg: GptConfig, device: torch.device | str = "cpu") -> GPT:
    """The model with its seeded weights, in the profile's dtype, on `device`."""
    model = GPT(cfg)
    init_weights(model, cfg.seed)
    return model.to(device=device, dtype=torch_dtype(cfg.dtype))


def synthetic_batch(
    cfg: GptConfig, step: int, batch: int | None = None, device: torch.device | str = "cpu"
) -> tuple[torch.Tensor, torch.Tensor]:
    """Tokens and next-token targets of one global step, from a generator seeded by (seed, step).

    Every rank draws the same global batch and takes its own slice, so data parallelism sees
    exactly the batch one process would.
    """
    gen = torch.Generator().manual_seed(cfg.seed * 1_000_003 + step)
    n = batch or cfg.batch
    data = torch.randint(0, cfg.vocab, (n, cfg.seq_len + 1), generator=gen)
    return data[:, :-1].to(device), data[:, 1:].to(device)


def loss_fn(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), targets.reshape(-1))
