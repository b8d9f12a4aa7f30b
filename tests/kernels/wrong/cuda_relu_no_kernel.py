"""Candidate for ReLU (`Model.forward(x) = torch.relu(x)`) that writes no CUDA kernel; expected status: no_custom_kernel.

It is numerically right but only calls the PyTorch operator it was asked to replace, so there is no
`load_inline` build to check and no speedup to credit.
"""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.clamp_min(x, 0.0)
