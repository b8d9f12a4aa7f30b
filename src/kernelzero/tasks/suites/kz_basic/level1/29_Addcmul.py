import torch
import torch.nn as nn


class Model(nn.Module):
    """Fused multiply-add of three tensors: out = c + value * a * b."""

    def __init__(self, value: float):
        super().__init__()
        self.value = value

    def forward(self, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        return torch.addcmul(c, a, b, value=self.value)


rows = 8192
cols = 8192


def get_inputs():
    return [torch.randn(rows, cols), torch.randn(rows, cols), torch.randn(rows, cols)]


def get_init_inputs():
    return [0.5]
