# task: kz-basic:level1/11_Sum_Over_Dim
# backend: helion
# expect: correct
# why: strided reduction over the middle dim of (batch, reduced, inner): 2-D output tiles over (batch, inner), a loop over the reduced dim in tiles of 32 summed in fp32
import torch
import torch.nn as nn
import helion
import helion.language as hl


@helion.kernel(config=helion.Config(block_sizes=[1, 128, 32], num_warps=4))
def sum_middle(x: torch.Tensor) -> torch.Tensor:
    batch, reduced, inner = x.size()
    out = torch.empty([batch, inner], dtype=x.dtype, device=x.device)
    for tile_b, tile_i in hl.tile([batch, inner]):
        acc = hl.zeros([tile_b, tile_i], dtype=torch.float32)
        for tile_r in hl.tile(reduced):
            acc = acc + x[tile_b, tile_r, tile_i].to(torch.float32).sum(dim=1)
        out[tile_b, tile_i] = acc.to(out.dtype)
    return out


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.dim != 1 or x.dim() != 3:
            raise ValueError("this kernel sums a 3-D tensor over its middle dimension")
        return sum_middle(x)
