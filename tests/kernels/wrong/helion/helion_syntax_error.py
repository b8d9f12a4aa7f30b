# task: kz-basic:level1/24_LeakyReLU
# backend: helion
# expect: format_error
# why: not valid Python: the kernel call in forward is missing its closing parenthesis (a truncated or garbled completion)
import torch
import torch.nn as nn
import helion
import helion.language as hl


@helion.kernel(config=helion.Config(block_sizes=[1024]))
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
        return leaky_relu(x.contiguous().view(-1), self.negative_slope.view(x.shape)
