import torch
import torch.nn as nn


class Model(nn.Module):
    """Softplus log(1 + exp(beta * x)) / beta with beta = 2, linear above the threshold 10."""

    def __init__(self, beta: float, threshold: float):
        super().__init__()
        self.act = nn.Softplus(beta=beta, threshold=threshold)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(x)


rows = 4096
cols = 32768


def get_inputs():
    # Spread wide enough that both the smooth part and the linear part above the threshold are hit.
    return [torch.randn(rows, cols) * 3.0]


def get_init_inputs():
    return [2.0, 10.0]
