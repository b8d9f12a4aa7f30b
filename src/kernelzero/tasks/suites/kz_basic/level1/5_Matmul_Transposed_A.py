import torch
import torch.nn as nn


class Model(nn.Module):
    """C = A^T @ B with A stored as (K, M): the weight-gradient product X^T dY of a linear layer."""

    def __init__(self):
        super().__init__()

    def forward(self, activations: torch.Tensor, grad_out: torch.Tensor) -> torch.Tensor:
        return torch.matmul(activations.t(), grad_out)


tokens = 8192
in_features = 2048
out_features = 2048


def get_inputs():
    activations = torch.randn(tokens, in_features)
    grad_out = torch.randn(tokens, out_features)
    return [activations, grad_out]


def get_init_inputs():
    return []
