import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """A convolution block of an image model: conv, group normalisation, SiLU, plus a learned residual scale."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, groups: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)
        self.norm = nn.GroupNorm(groups, out_channels)
        self.scale = nn.Parameter(torch.ones(1, out_channels, 1, 1) * 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.norm(self.conv(x))
        return F.silu(y) * self.scale + y


batch_size = 16
in_channels = 32
out_channels = 64
kernel_size = 3
groups = 8
height = 128
width = 128


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, groups]
