import torch
import torch.nn as nn


class Model(nn.Module):
    """Attention pooling: weights = softmax over the sequence of x @ query, output = sum of weights * x."""

    def __init__(self, hidden: int):
        super().__init__()
        # A learned query whose scores have standard deviation ~2 on unit-variance inputs.
        self.query = nn.Parameter(2.0 * torch.randn(hidden) / hidden**0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weights = torch.softmax(x @ self.query, dim=1)
        return (weights.unsqueeze(-1) * x).sum(dim=1)


batch = 64
seq = 4096
hidden = 1024


def get_inputs():
    return [torch.randn(batch, seq, hidden)]


def get_init_inputs():
    return [hidden]
