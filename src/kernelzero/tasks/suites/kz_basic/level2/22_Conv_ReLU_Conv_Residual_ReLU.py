import torch
import torch.nn as nn


class Model(nn.Module):
    """ReLU(x + Conv(ReLU(Conv(x)))): a ResNet basic block without normalisation."""

    def __init__(self, channels: int, kernel_size: int):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, kernel_size, padding=kernel_size // 2)
        self.conv2 = nn.Conv2d(channels, channels, kernel_size, padding=kernel_size // 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x + self.conv2(torch.relu(self.conv1(x))))


batch = 8
channels = 64
kernel_size = 3
height = 128
width = 128


def get_inputs():
    return [torch.randn(batch, channels, height, width)]


def get_init_inputs():
    return [channels, kernel_size]
