# task: kz-basic:level1/22_SiLU
# backend: helion
# expect: compile_error
# why: calls torch.sigmiod (a typo of torch.sigmoid) inside the hl.tile loop: Helion's compiler fails while tracing the kernel, on any machine
import torch
import torch.nn as nn
import helion
import helion.language as hl


@helion.kernel(config=helion.Config(block_sizes=[1024], num_warps=4))
def silu(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.numel()):
        v = x[tile]
        out[tile] = v * torch.sigmiod(v)
    return out


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return silu(x.contiguous().view(-1)).view(x.shape)
