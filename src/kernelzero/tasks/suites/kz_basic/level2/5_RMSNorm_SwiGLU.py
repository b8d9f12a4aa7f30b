import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """SiLU(g) * u with g, u = projections of RMSNorm(x): the gated half of a LLaMA-style MLP."""

    def __init__(self, hidden: int, intermediate: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.norm_weight = nn.Parameter(1.0 + 0.3 * torch.randn(hidden))
        self.gate = nn.Linear(hidden, intermediate, bias=False)
        self.up = nn.Linear(hidden, intermediate, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps) * self.norm_weight
        return F.silu(self.gate(h)) * self.up(h)


tokens = 4096
hidden = 2048
intermediate = 5632


def get_inputs():
    return [torch.randn(tokens, hidden)]


def get_init_inputs():
    return [hidden, intermediate]
