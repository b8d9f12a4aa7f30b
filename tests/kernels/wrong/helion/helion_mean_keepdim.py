# task: kz-basic:level1/12_Mean_Over_Last_Dim
# backend: helion
# expect: shape_mismatch
# why: the row means are right but come back with keepdim shape (rows, 1) instead of (rows,)
import torch
import torch.nn as nn
import helion
import helion.language as hl


@helion.kernel(config=helion.Config(block_sizes=[4], num_warps=8))
def row_mean(x: torch.Tensor) -> torch.Tensor:
    rows, cols = x.size()
    out = torch.empty([rows, 1], dtype=x.dtype, device=x.device)
    for tile_r in hl.tile(rows):
        out[tile_r, :] = torch.mean(x[tile_r, :].to(torch.float32), dim=1, keepdim=True).to(out.dtype)
    return out


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return row_mean(x.contiguous())
