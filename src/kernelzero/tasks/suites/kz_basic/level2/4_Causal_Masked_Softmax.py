import torch
import torch.nn as nn


class Model(nn.Module):
    """softmax(scores * scale) over keys with future positions masked out (causal attention weights)."""

    def __init__(self, seq_len: int, scale: float):
        super().__init__()
        self.scale = scale
        future = torch.ones(seq_len, seq_len, dtype=torch.bool).triu(diagonal=1)
        self.register_buffer("future", future, persistent=False)

    def forward(self, scores: torch.Tensor) -> torch.Tensor:
        scores = (scores * self.scale).masked_fill(self.future, float("-inf"))
        return torch.softmax(scores, dim=-1)


batch = 16
heads = 8
seq_len = 1024
scale = 0.25


def get_inputs():
    # Raw query-key products; after scaling the logits have standard deviation 2.
    return [torch.randn(batch, heads, seq_len, seq_len) * 8.0]


def get_init_inputs():
    return [seq_len, scale]
