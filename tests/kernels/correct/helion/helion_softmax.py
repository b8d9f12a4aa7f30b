# task: kz-basic:level1/15_Softmax
# backend: helion
# expect: correct
# why: row softmax, one row per program holding the whole row: max-subtracted exp, row sum, divide
import torch
import torch.nn as nn
import helion
import helion.language as hl


@helion.kernel(config=helion.Config(block_sizes=[1], num_warps=8))
def softmax(x: torch.Tensor) -> torch.Tensor:
    rows, _ = x.size()
    out = torch.empty_like(x)
    for tile_r in hl.tile(rows):
        values = x[tile_r, :]
        shifted = torch.exp(values - torch.amax(values, dim=1, keepdim=True))
        out[tile_r, :] = shifted / torch.sum(shifted, dim=1, keepdim=True)
    return out


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, logits: torch.Tensor) -> torch.Tensor:
        return softmax(logits.contiguous())
