import torch
import torch.nn as nn


class Model(nn.Module):
    """Apply rotary position embeddings (RoPE, rotate-half form) to (batch, heads, seq, head_dim) queries."""

    def __init__(self, seq_len: int, head_dim: int):
        super().__init__()
        inv_freq = 1.0 / (10000.0 ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
        angles = torch.outer(torch.arange(seq_len, dtype=torch.float32), inv_freq)
        angles = torch.cat([angles, angles], dim=-1)
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x1, x2 = x.chunk(2, dim=-1)
        rotated = torch.cat([-x2, x1], dim=-1)
        return x * self.cos + rotated * self.sin


batch = 16
heads = 32
seq_len = 2048
head_dim = 128


def get_inputs():
    return [torch.randn(batch, heads, seq_len, head_dim)]


def get_init_inputs():
    return [seq_len, head_dim]
