import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """GELU(x @ W^T + b): the up-projection of a transformer MLP."""

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(self.linear(x))


tokens = 4096
in_features = 2048
out_features = 8192


def get_inputs():
    return [torch.randn(tokens, in_features)]


def get_init_inputs():
    return [in_features, out_features]
