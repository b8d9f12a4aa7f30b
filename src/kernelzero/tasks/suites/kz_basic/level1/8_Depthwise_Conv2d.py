import torch
import torch.nn as nn


class Model(nn.Module):
    """A depthwise 5x5 convolution (one filter per channel, groups = channels), padding 2."""

    def __init__(self, channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, kernel_size, padding=kernel_size // 2, groups=channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


batch = 16
channels = 64
kernel_size = 5
height = 256
width = 256


def get_inputs():
    return [torch.randn(batch, channels, height, width)]


def get_init_inputs():
    return [channels, kernel_size]
