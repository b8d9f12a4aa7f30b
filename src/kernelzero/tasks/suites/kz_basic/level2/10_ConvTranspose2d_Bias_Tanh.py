import torch
import torch.nn as nn


class Model(nn.Module):
    """tanh(ConvTranspose2d(x) + bias): a stride-2 learned upsampling layer of an image decoder."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int):
        super().__init__()
        self.deconv = nn.ConvTranspose2d(
            in_channels, out_channels, kernel_size, stride=stride, padding=(kernel_size - stride) // 2, bias=False
        )
        self.bias = nn.Parameter(0.5 * torch.randn(out_channels, 1, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.deconv(x) + self.bias)


batch = 16
in_channels = 64
out_channels = 32
kernel_size = 4
stride = 2
height = 128
width = 128


def get_inputs():
    return [torch.randn(batch, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride]
