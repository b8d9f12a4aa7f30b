import torch
import torch.nn as nn


class Model(nn.Module):
    """C = A @ B for two square fp32 matrices."""

    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.matmul(a, b)


size = 4096


def get_inputs():
    a = torch.randn(size, size)
    b = torch.randn(size, size)
    return [a, b]


def get_init_inputs():
    return []
