# task: kz-basic:level1/21_GELU
# backend: helion
# expect: dtype_mismatch
# why: writes the output as float16 "to halve the store bandwidth"; the values are close but the dtype is not the reference's float32
import torch
import torch.nn as nn
import helion
import helion.language as hl


@helion.kernel(config=helion.Config(block_sizes=[1024], num_warps=4))
def gelu_half(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty(x.shape, dtype=torch.float16, device=x.device)
    for tile in hl.tile(x.numel()):
        v = x[tile]
        out[tile] = (0.5 * v * (1.0 + torch.erf(v * 0.7071067811865476))).to(torch.float16)
    return out


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return gelu_half(x.contiguous().view(-1)).view(x.shape)
