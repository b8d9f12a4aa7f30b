import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """Pointwise(ReLU6(BatchNorm(Depthwise3x3(x)))): a MobileNet depthwise-separable block, inference mode."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.depthwise = nn.Conv2d(
            in_channels, in_channels, kernel_size, padding=kernel_size // 2, groups=in_channels, bias=False
        )
        self.bn = nn.BatchNorm2d(in_channels)
        with torch.no_grad():
            self.bn.running_mean.normal_(0.0, 0.2)
            self.bn.running_var.uniform_(0.1, 0.5)
            self.bn.weight.normal_(1.0, 0.3)
            self.bn.bias.normal_(0.5, 0.3)
        self.pointwise = nn.Conv2d(in_channels, out_channels, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        bn = self.bn
        y = self.depthwise(x)
        y = F.batch_norm(y, bn.running_mean, bn.running_var, bn.weight, bn.bias, training=False, eps=bn.eps)
        return self.pointwise(F.relu6(y))


batch = 32
in_channels = 64
out_channels = 128
kernel_size = 3
height = 128
width = 128


def get_inputs():
    return [torch.randn(batch, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
