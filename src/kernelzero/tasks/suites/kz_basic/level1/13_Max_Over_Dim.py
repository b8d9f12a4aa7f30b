import torch
import torch.nn as nn


class Model(nn.Module):
    """Maximum of a 3-D tensor over dimension 1 (values only)."""

    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.amax(x, dim=self.dim)


batch = 128
reduced = 256
inner = 8192
dim = 1


def get_inputs():
    return [torch.randn(batch, reduced, inner)]


def get_init_inputs():
    return [dim]
