# task: kz-basic:level1/15_Softmax
# backend: helion
# expect: input_mutated
# why: right softmax values, but the kernel stores exp(x - max) back into the input row as scratch "to avoid a second buffer"
import torch
import torch.nn as nn
import helion
import helion.language as hl


@helion.kernel(config=helion.Config(block_sizes=[1], num_warps=8))
def softmax_scratch(x: torch.Tensor) -> torch.Tensor:
    rows, _ = x.size()
    out = torch.empty_like(x)
    for tile_r in hl.tile(rows):
        values = x[tile_r, :]
        shifted = torch.exp(values - torch.amax(values, dim=1, keepdim=True))
        x[tile_r, :] = shifted
        out[tile_r, :] = shifted / torch.sum(shifted, dim=1, keepdim=True)
    return out


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, logits: torch.Tensor) -> torch.Tensor:
        return softmax_scratch(logits)
