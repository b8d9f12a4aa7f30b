# task: kz-basic:level1/2_Rectangular_Matmul
# backend: helion
# expect: correct
# why: tiled matmul: 2-D output tiles of 64x64, a K loop of 32-wide tiles accumulated in fp32 with torch.addmm (a tl.dot), fp32 (ieee) dot precision; M, N and K edges masked by Helion
import torch
import torch.nn as nn
import helion
import helion.language as hl


@helion.kernel(config=helion.Config(block_sizes=[64, 64, 32], num_warps=4, num_stages=3), dot_precision="ieee")
def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    m, k = a.size()
    _, n = b.size()
    out = torch.empty([m, n], dtype=a.dtype, device=a.device)
    for tile_m, tile_n in hl.tile([m, n]):
        acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
        for tile_k in hl.tile(k):
            acc = torch.addmm(acc, a[tile_m, tile_k], b[tile_k, tile_n])
        out[tile_m, tile_n] = acc.to(out.dtype)
    return out


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return matmul(a, b)
