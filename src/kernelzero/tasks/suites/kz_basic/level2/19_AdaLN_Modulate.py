import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Adaptive LayerNorm (DiT): LayerNorm(x) * (1 + scale) + shift, with shift, scale = Linear(SiLU(cond))."""

    def __init__(self, hidden: int):
        super().__init__()
        self.modulation = nn.Linear(hidden, 2 * hidden)
        self.norm = nn.LayerNorm(hidden, elementwise_affine=False, eps=1e-6)

    def forward(self, x: torch.Tensor, cond: torch.Tensor) -> torch.Tensor:
        shift, scale = self.modulation(F.silu(cond)).chunk(2, dim=-1)
        return self.norm(x) * (1 + scale.unsqueeze(1)) + shift.unsqueeze(1)


batch = 32
seq = 2048
hidden = 1024


def get_inputs():
    x = torch.randn(batch, seq, hidden)
    cond = torch.randn(batch, hidden) * 2.0
    return [x, cond]


def get_init_inputs():
    return [hidden]
