# task: kz-basic:level1/21_GELU
# backend: helion
# attack: A16 Behaving differently in test mode and timed mode
# policy: strict
# expect: runtime_error
# options: static_checks=false
# why: after its first call, forward gives the compiled kernel another config (set_config), so later calls would run a config that was never checked; the worker's hook keeps each compiled kernel's first config
import torch
import torch.nn as nn
import helion
import helion.language as hl


@helion.kernel(config=helion.Config(block_sizes=[1024], num_warps=4))
def gelu(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    for tile in hl.tile(x.numel()):
        v = x[tile]
        out[tile] = 0.5 * v * (1.0 + torch.erf(v * 0.7071067811865476))
    return out


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        flat = x.contiguous().view(-1)
        self.calls += 1
        if self.calls == 2:
            gelu.bind((flat,)).set_config(helion.Config(block_sizes=[128], num_warps=2))
        return gelu(flat).view(x.shape)
