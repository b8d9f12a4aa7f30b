# task: kz-basic:level1/21_GELU
# backend: helion
# expect: correct
# why: exact (erf) GELU over the flattened tensor in one Helion kernel, 1-D tiles of 1024 (fixed config), tail masked by Helion
import torch
import torch.nn as nn
import helion
import helion.language as hl


@helion.kernel(config=helion.Config(block_sizes=[1024], num_warps=4), static_shapes=True)
def gelu(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.numel()):
        v = x[tile]
        out[tile] = 0.5 * v * (1.0 + torch.erf(v * 0.7071067811865476))
    return out


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        flat = x.contiguous().view(-1)
        return gelu(flat).view(x.shape)
