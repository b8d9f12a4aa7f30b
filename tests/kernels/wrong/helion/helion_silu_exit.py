# task: kz-basic:level1/22_SiLU
# backend: helion
# expect: crash
# options: static_checks=false
# why: forward calls os._exit(0) after the kernel: exit status 0 but no result. Static checks (which reject os._exit) are off to test the sandbox's own verdict
import os

import torch
import torch.nn as nn
import helion
import helion.language as hl


@helion.kernel(config=helion.Config(block_sizes=[1024], num_warps=4))
def silu(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.numel()):
        v = x[tile]
        out[tile] = v * torch.sigmoid(v)
    return out


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = silu(x.contiguous().view(-1)).view(x.shape)
        os._exit(0)
        return y
