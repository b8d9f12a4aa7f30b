# task: kz-basic:level1/24_LeakyReLU
# backend: helion
# expect: no_kernel
# why: imports Helion but writes no @helion.kernel: forward is a plain PyTorch function (the static check finds no kernel)
import torch
import torch.nn as nn
import helion.language as hl


def leaky_relu(x: torch.Tensor, slope: float) -> torch.Tensor:
    return torch.where(x > 0, x, x * slope)


class ModelNew(nn.Module):
    def __init__(self, negative_slope: float):
        super().__init__()
        self.negative_slope = negative_slope

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return leaky_relu(x, self.negative_slope)
