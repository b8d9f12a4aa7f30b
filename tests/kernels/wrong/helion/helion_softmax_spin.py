# task: kz-basic:level1/15_Softmax
# backend: helion
# expect: timeout
# options: timeout_floor_s=4 timeout_scale=20
# why: forward searches a power-of-two row width but never grows it (`width * 2` instead of `width *= 2`), so it loops forever in Python before the kernel
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
        width = 1
        while width < logits.shape[1]:
            width * 2
        return softmax(logits.contiguous())
