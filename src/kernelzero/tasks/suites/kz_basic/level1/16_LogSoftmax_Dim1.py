import torch
import torch.nn as nn


class Model(nn.Module):
    """Log-softmax over the channel dimension (dim 1) of a (batch, channels, length) tensor."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.log_softmax(x, dim=1)


batch = 64
channels = 512
length = 4096


def get_inputs():
    return [torch.randn(batch, channels, length)]


def get_init_inputs():
    return []
