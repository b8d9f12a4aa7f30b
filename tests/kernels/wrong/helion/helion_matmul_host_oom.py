# task: kz-basic:level1/2_Rectangular_Matmul
# backend: helion
# expect: oom
# options: host_mem_gb=3
# why: forward first fills an 8 GiB host-side "split-K workspace" (torch.ones on the CPU, every page touched); the memory watchdog kills it past host_mem_gb
import torch
import torch.nn as nn
import helion
import helion.language as hl


@helion.kernel(config=helion.Config(block_sizes=[64, 64, 32], num_warps=4, num_stages=3), dot_precision="ieee")
def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    m, k = a.size()
    _, n = b.size()
    out = torch.empty([m, n], dtype=a.dtype, device=a.device)
    for tile_m, tile_n in hl.tile([m, n]):
        acc = hl.zeros([tile_m, tile_n], dtype=torch.float32)
        for tile_k in hl.tile(k):
            acc = torch.addmm(acc, a[tile_m, tile_k], b[tile_k, tile_n])
        out[tile_m, tile_n] = acc.to(out.dtype)
    return out


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self._workspace = None

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        if self._workspace is None:
            self._workspace = torch.ones(2**31, dtype=torch.float32)  # 8 GiB "generously sized" scratch
        return matmul(a, b)
