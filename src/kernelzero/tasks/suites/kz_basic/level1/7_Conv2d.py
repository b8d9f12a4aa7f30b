import torch
import torch.nn as nn


class Model(nn.Module):
    """A 3x3 2-D convolution with padding 1 and bias, channels doubling."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


batch = 8
in_channels = 32
out_channels = 64
kernel_size = 3
height = 256
width = 256


def get_inputs():
    return [torch.randn(batch, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
