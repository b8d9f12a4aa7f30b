# task: kz-basic:level1/24_LeakyReLU
# backend: helion
# expect: correct
# why: LeakyReLU elementwise over the flattened feature maps with the slope passed as a runtime scalar; 1-D tiles of 2048
import torch
import torch.nn as nn
import helion
import helion.language as hl


@helion.kernel(config=helion.Config(block_sizes=[2048], num_warps=8))
def leaky_relu(x: torch.Tensor, slope: float) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.numel()):
        v = x[tile]
        out[tile] = torch.where(v > 0, v, v * slope)
    return out


class ModelNew(nn.Module):
    def __init__(self, negative_slope: float):
        super().__init__()
        self.negative_slope = negative_slope

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return leaky_relu(x.contiguous().view(-1), self.negative_slope).view(x.shape)
