import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """MaxPool1d(GELU(Conv1d(x))): an audio front-end over mel-spectrogram frames."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, pool: int):
        super().__init__()
        self.conv = nn.Conv1d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)
        self.pool = nn.MaxPool1d(pool)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(F.gelu(self.conv(x)))


batch = 32
in_channels = 80
out_channels = 256
kernel_size = 3
pool = 2
frames = 8192


def get_inputs():
    return [torch.randn(batch, in_channels, frames)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, pool]
