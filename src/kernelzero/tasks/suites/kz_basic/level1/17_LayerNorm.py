import torch
import torch.nn as nn


class Model(nn.Module):
    """LayerNorm over the hidden dimension of (batch, seq, hidden) activations, with affine parameters."""

    def __init__(self, hidden: int):
        super().__init__()
        self.norm = nn.LayerNorm(hidden, eps=1e-5)
        # Affine parameters as after training, so that ignoring them is an error.
        nn.init.normal_(self.norm.weight, mean=1.0, std=0.3)
        nn.init.normal_(self.norm.bias, mean=0.0, std=0.3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x)


batch = 16
seq = 2048
hidden = 4096


def get_inputs():
    return [torch.randn(batch, seq, hidden)]


def get_init_inputs():
    return [hidden]
