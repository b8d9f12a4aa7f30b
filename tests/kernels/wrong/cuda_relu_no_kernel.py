# task: kz-basic:level1/24_LeakyReLU
# backend: cuda
# expect: no_kernel
# why: no CUDA kernel at all, only the PyTorch op: the static check finds no extension build (no_kernel)
"""Candidate for LeakyReLU that writes no CUDA kernel (a negative control, not a real solution).

It is numerically right but only calls the PyTorch operator it was asked to replace, so there is no
extension build to check and no speedup to credit: the static check answers no_kernel before anything
runs, with or without a GPU. (Written for ReLU first; now targets LeakyReLU.) Keep the name of the
torch build helper out of this file: the static check looks for it as a plain substring.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, negative_slope: float) -> None:
        super().__init__()
        self.negative_slope = negative_slope

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.leaky_relu(x, self.negative_slope)
