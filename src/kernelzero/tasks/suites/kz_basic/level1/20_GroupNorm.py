import torch
import torch.nn as nn


class Model(nn.Module):
    """GroupNorm with 8 groups over (batch, channels, height, width) feature maps, with affine parameters."""

    def __init__(self, num_groups: int, channels: int):
        super().__init__()
        self.norm = nn.GroupNorm(num_groups, channels)
        nn.init.normal_(self.norm.weight, mean=1.0, std=0.3)
        nn.init.normal_(self.norm.bias, mean=0.0, std=0.3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x)


batch = 32
channels = 128
num_groups = 8
height = 128
width = 128


def get_inputs():
    return [torch.randn(batch, channels, height, width)]


def get_init_inputs():
    return [num_groups, channels]
