import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """tanh(BatchNorm1d(x @ W^T + b)) with inference-mode batch statistics."""

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.bn = nn.BatchNorm1d(out_features)
        with torch.no_grad():
            self.bn.running_mean.normal_(0.0, 0.2)
            self.bn.running_var.uniform_(0.2, 0.6)
            self.bn.weight.normal_(1.0, 0.3)
            self.bn.bias.normal_(0.0, 0.3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        bn = self.bn
        y = self.linear(x)
        y = F.batch_norm(y, bn.running_mean, bn.running_var, bn.weight, bn.bias, training=False, eps=bn.eps)
        return torch.tanh(y)


batch = 16384
in_features = 1024
out_features = 2048


def get_inputs():
    return [torch.randn(batch, in_features)]


def get_init_inputs():
    return [in_features, out_features]
