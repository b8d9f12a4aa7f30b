# task: kz-basic:level1/21_GELU
# backend: helion
# attack: A12 Fallback to torch or a library, and decoy kernels
# policy: strict
# expect: no_kernel
# expect-cpu: runtime_error
# options: static_checks=false
# why: sets HELION_INTERPRET=1 before importing Helion, which turns every kernel into eager PyTorch (ref mode); the worker's hook cleared it, but the candidate sets it again. With the static checks off (they reject the setting's name), the launch count must find no kernel (without a GPU, Helion itself refuses HELION_INTERPRET beside the interpreter's TRITON_INTERPRET: runtime_error)
import os

os.environ["HELION_INTERPRET"] = "1"

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import helion  # noqa: E402
import helion.language as hl  # noqa: E402


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

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return gelu(x.contiguous().view(-1)).view(x.shape)
