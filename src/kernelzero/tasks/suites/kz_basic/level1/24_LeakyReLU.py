import torch
import torch.nn as nn


class Model(nn.Module):
    """LeakyReLU with negative slope 0.1 on signed feature maps."""

    def __init__(self, negative_slope: float):
        super().__init__()
        self.act = nn.LeakyReLU(negative_slope)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(x)


batch = 32
channels = 64
height = 256
width = 256


def get_inputs():
    return [torch.randn(batch, channels, height, width)]


def get_init_inputs():
    return [0.1]
