import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """GLU(x @ W^T + b): a projection to twice the width, then first half * sigmoid(second half)."""

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.proj = nn.Linear(in_features, 2 * out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.glu(self.proj(x), dim=-1)


tokens = 8192
in_features = 1024
out_features = 2048


def get_inputs():
    return [torch.randn(tokens, in_features) * 2.0]


def get_init_inputs():
    return [in_features, out_features]
