# task: kz-basic:level1/2_Rectangular_Matmul
# backend: helion
# expect: static_violation
# why: gives the kernel a list of three configs, which Helion autotunes on the first call; verification runs one fixed config (the static check names the autotuning)
import torch
import torch.nn as nn
import helion
import helion.language as hl


@helion.kernel(
    configs=[
        helion.Config(block_sizes=[64, 64, 32], num_warps=4),
        helion.Config(block_sizes=[128, 64, 32], num_warps=8),
        helion.Config(block_sizes=[64, 128, 64], num_warps=8),
    ],
    dot_precision="ieee",
)
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
