import torch
import torch.nn as nn


class Model(nn.Module):
    """Causal scaled dot-product attention written out: softmax(mask(Q K^T / sqrt(d))) V."""

    def __init__(self, seq_len: int):
        super().__init__()
        future = torch.ones(seq_len, seq_len, dtype=torch.bool).triu(diagonal=1)
        self.register_buffer("future", future, persistent=False)

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        scores = torch.matmul(q, k.transpose(-2, -1)) * q.shape[-1] ** -0.5
        scores = scores.masked_fill(self.future, float("-inf"))
        return torch.matmul(torch.softmax(scores, dim=-1), v)


batch = 8
heads = 16
seq_len = 1024
head_dim = 64


def get_inputs():
    # Queries and keys with a trained model's scale (logit std ~2), so attention is peaked, not uniform.
    q = torch.randn(batch, heads, seq_len, head_dim) * 1.5
    k = torch.randn(batch, heads, seq_len, head_dim) * 1.5
    v = torch.randn(batch, heads, seq_len, head_dim)
    return [q, k, v]


def get_init_inputs():
    return [seq_len]
