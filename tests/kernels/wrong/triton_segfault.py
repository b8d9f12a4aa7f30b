# task: kz-basic:level1/22_SiLU
# backend: triton
# expect: crash
# why: after the kernel, forward reads a numpy as_strided "window view" whose byte stride is 2**47: the read leaves the address space and the process dies with SIGSEGV
import numpy as np
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def silu_kernel(x_ptr, y_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(y_ptr + offsets, x * tl.sigmoid(x), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.table = np.zeros(4, dtype=np.float32)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        silu_kernel[(triton.cdiv(n, 1024),)](x, y, n, BLOCK_SIZE=1024)
        # sliding-window view over a host table; the stride was meant in elements, not 2**47 bytes
        windows = np.lib.stride_tricks.as_strided(self.table, shape=(2, 4), strides=(1 << 47, 4))
        _ = float(windows.sum())
        return y
