import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Weight-only int8 linear layer: x @ (q * scale)^T + b with per-output-channel scales."""

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        qweight = torch.randint(-127, 128, (out_features, in_features), dtype=torch.int8)
        self.register_buffer("qweight", qweight)
        # int8 values have std ~73; these scales give dequantised weights of std ~1/sqrt(in_features).
        self.scale = nn.Parameter((0.5 + torch.rand(out_features, 1)) / (73.0 * in_features**0.5))
        self.bias = nn.Parameter(0.1 * torch.randn(out_features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weight = self.qweight.to(x.dtype) * self.scale
        return F.linear(x, weight, self.bias)


tokens = 4096
in_features = 4096
out_features = 4096


def get_inputs():
    return [torch.randn(tokens, in_features)]


def get_init_inputs():
    return [in_features, out_features]
