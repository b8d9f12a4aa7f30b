import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """SiLU(GroupNorm(Conv2d(x))): the convolution block of a diffusion U-Net."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, num_groups: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)
        self.norm = nn.GroupNorm(num_groups, out_channels)
        nn.init.normal_(self.norm.weight, mean=1.0, std=0.3)
        nn.init.normal_(self.norm.bias, mean=0.0, std=0.3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.silu(self.norm(self.conv(x)))


batch = 8
in_channels = 64
out_channels = 128
kernel_size = 3
num_groups = 8
height = 128
width = 128


def get_inputs():
    return [torch.randn(batch, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, num_groups]
