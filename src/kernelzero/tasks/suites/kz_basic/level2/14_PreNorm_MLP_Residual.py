import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """x + W2 GELU(W1 LayerNorm(x)): the MLP sub-block of a pre-norm transformer layer."""

    def __init__(self, hidden: int):
        super().__init__()
        self.norm = nn.LayerNorm(hidden)
        self.fc1 = nn.Linear(hidden, 4 * hidden)
        self.fc2 = nn.Linear(4 * hidden, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.fc2(F.gelu(self.fc1(self.norm(x))))


tokens = 2048
hidden = 768


def get_inputs():
    return [torch.randn(tokens, hidden)]


def get_init_inputs():
    return [hidden]
