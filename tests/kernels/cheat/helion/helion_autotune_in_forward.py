# task: kz-basic:level1/21_GELU
# backend: helion
# attack: A28 Gaming warm-up, JIT or autotuning
# policy: strict
# expect: runtime_error
# options: static_checks=false
# why: forward autotunes its kernel on the first call (hundreds of candidate runs and a config picked on timings of its own); the worker's hook refuses Helion's autotune(), so the call fails with a message saying to give one config
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
        self.tuned = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        flat = x.contiguous().view(-1)
        if not self.tuned:
            gelu.autotune((flat,))
            self.tuned = True
        return gelu(flat).view(x.shape)
