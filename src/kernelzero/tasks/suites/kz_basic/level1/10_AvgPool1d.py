import torch
import torch.nn as nn


class Model(nn.Module):
    """1-D average pooling, window 4, stride 2, padding 1 (zeros counted in the average)."""

    def __init__(self, kernel_size: int, stride: int, padding: int):
        super().__init__()
        self.pool = nn.AvgPool1d(kernel_size, stride=stride, padding=padding)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(x)


batch = 64
channels = 128
length = 16384
kernel_size = 4
stride = 2
padding = 1


def get_inputs():
    return [torch.randn(batch, channels, length)]


def get_init_inputs():
    return [kernel_size, stride, padding]
