import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """SiLU (swish): x * sigmoid(x), elementwise on (batch, seq, hidden) activations."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.silu(x)


batch = 64
seq = 1024
hidden = 2048


def get_inputs():
    return [torch.randn(batch, seq, hidden) * 2.0]


def get_init_inputs():
    return []
