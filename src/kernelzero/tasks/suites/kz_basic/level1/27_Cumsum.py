import torch
import torch.nn as nn


class Model(nn.Module):
    """Inclusive prefix sum along the last dimension of each row."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cumsum(x, dim=-1)


rows = 32768
length = 4096


def get_inputs():
    return [torch.randn(rows, length)]


def get_init_inputs():
    return []
