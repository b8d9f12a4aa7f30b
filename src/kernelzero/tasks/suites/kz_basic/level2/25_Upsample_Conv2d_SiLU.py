import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """SiLU(Conv2d(nearest-upsample-x2(x))): the upsampling block of a convolutional decoder."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.interpolate(x, scale_factor=2, mode="nearest")
        return F.silu(self.conv(x))


batch = 8
in_channels = 64
out_channels = 32
kernel_size = 3
height = 128
width = 128


def get_inputs():
    return [torch.randn(batch, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
