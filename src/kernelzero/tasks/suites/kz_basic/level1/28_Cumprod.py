import torch
import torch.nn as nn


class Model(nn.Module):
    """Inclusive prefix product along the last dimension of each row of positive factors."""

    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cumprod(x, dim=-1)


rows = 32768
length = 4096


def get_inputs():
    # Factors exp(N(0, 1/length)): the log of the running product is a random walk that ends
    # with standard deviation 1, so products stay within about e^(+-4) at any length.
    return [torch.exp(torch.randn(rows, length) / length**0.5)]


def get_init_inputs():
    return []
