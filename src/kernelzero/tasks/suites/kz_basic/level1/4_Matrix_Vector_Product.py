import torch
import torch.nn as nn


class Model(nn.Module):
    """y = A @ x for a large (M, K) matrix and a length-K vector (a memory-bound GEMV)."""

    def __init__(self):
        super().__init__()

    def forward(self, matrix: torch.Tensor, vector: torch.Tensor) -> torch.Tensor:
        return torch.mv(matrix, vector)


rows = 16384
cols = 16384


def get_inputs():
    matrix = torch.randn(rows, cols)
    vector = torch.randn(cols)
    return [matrix, vector]


def get_init_inputs():
    return []
