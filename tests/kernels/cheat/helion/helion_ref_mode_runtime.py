# task: kz-basic:level1/21_GELU
# backend: helion
# attack: A12 Fallback to torch or a library, and decoy kernels
# policy: strict
# expect: no_kernel
# options: static_checks=false
# why: as helion_ref_mode with the static checks off: the body runs as eager PyTorch, so the forward launches none of the candidate's kernels
import torch
import torch.nn as nn
import helion
import helion.language as hl


@helion.kernel(config=helion.Config(block_sizes=[1024], num_warps=4), ref_mode=helion.RefMode.EAGER)
def gelu(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.numel()):
        v = x[tile]
        out[tile] = 0.5 * v * (1.0 + torch.erf(v * 0.7071067811865476))
    return out


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return gelu(x.contiguous().view(-1)).view(x.shape)
