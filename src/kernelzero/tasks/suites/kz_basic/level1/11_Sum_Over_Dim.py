import torch
import torch.nn as nn


class Model(nn.Module):
    """Sum of a 3-D tensor over its middle dimension (a strided reduction)."""

    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sum(x, dim=self.dim)


batch = 64
reduced = 4096
inner = 1024
dim = 1


def get_inputs():
    return [torch.randn(batch, reduced, inner)]


def get_init_inputs():
    return [dim]
