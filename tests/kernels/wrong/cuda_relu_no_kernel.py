# task: kz-basic:level1/24_LeakyReLU
# backend: cuda
# expect: correct
# expect-cpu: compile_error
# why: no CUDA kernel at all, only the PyTorch op (a negative control for the anti-cheat issue): the CPU path requires a load_inline build, the GPU path does not check yet
"""Candidate for LeakyReLU that writes no CUDA kernel (a negative control, not a real solution).

It is numerically right but only calls the PyTorch operator it was asked to replace, so there is no
`load_inline` build to check and no speedup to credit. Without a GPU the verifier answers compile_error
("builds no CUDA extension"); on a GPU nothing checks for a custom kernel yet, so it passes as correct
until the anti-cheat issue's checks (kernels must really launch, no PyTorch fallbacks) land.
(Written for ReLU first; now targets LeakyReLU.)
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
