# task: kz-basic:level1/11_Sum_Over_Dim
# backend: helion
# expect: mismatch
# why: views x as (batch, inner, reduced), as if the reduced dim were the contiguous one, and sums the last axis: right output shape, wrong sums
import torch
import torch.nn as nn
import helion
import helion.language as hl


@helion.kernel(config=helion.Config(block_sizes=[1, 64, 32], num_warps=4))
def sum_last(x: torch.Tensor) -> torch.Tensor:
    batch, inner, reduced = x.size()
    out = torch.empty([batch, inner], dtype=x.dtype, device=x.device)
    for tile_b, tile_i in hl.tile([batch, inner]):
        acc = hl.zeros([tile_b, tile_i], dtype=torch.float32)
        for tile_r in hl.tile(reduced):
            acc = acc + x[tile_b, tile_i, tile_r].to(torch.float32).sum(dim=2)
        out[tile_b, tile_i] = acc.to(out.dtype)
    return out


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, reduced, inner = x.shape
        return sum_last(x.contiguous().view(batch, inner, reduced))
