# task: kz-basic:level1/21_GELU at rows=16, cols=16 (tests/optimize/test_optimize.py)
# backend: triton
# expect: correct at rows*cols <= 256 elements, mismatch above (the element count is hard-coded)
# why: a kernel that passes at the size it was written for and fails at double the size; `kernelzero optimize`
#      must never choose it
import torch
import torch.nn as nn
import triton
import triton.language as tl

N_ELEMENTS = 16 * 16  # the size the kernel was written for


@triton.jit
def gelu_fixed_kernel(x_ptr, out_ptr, N: tl.constexpr, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid.to(tl.int64) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < N
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
    y = 0.5 * x * (1.0 + tl.math.erf(x * 0.7071067811865476))
    tl.store(out_ptr + offsets, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.zeros_like(x)  # zeros where the fixed count stops: a mismatch, never garbage that reads nan
        BLOCK_SIZE = 1024
        grid = (triton.cdiv(x.numel(), BLOCK_SIZE),)
        gelu_fixed_kernel[grid](x, out, N=N_ELEMENTS, BLOCK_SIZE=BLOCK_SIZE)
        return out
