import torch
import torch.nn as nn


class Model(nn.Module):
    """C = A @ B with A of shape (M, K) and B of shape (K, N), M, K and N all different."""

    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.matmul(a, b)


rows = 8192
inner = 1024
cols = 6144


def get_inputs():
    a = torch.randn(rows, inner)
    b = torch.randn(inner, cols)
    return [a, b]


def get_init_inputs():
    return []
