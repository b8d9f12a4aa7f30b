# task: kz-basic:level1/21_GELU
# backend: triton
# expect: mismatch
# why: the mask is built from the row length instead of numel, so only the first row is computed; the rest stays zero
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def gelu_kernel(x_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
    y = 0.5 * x * (1.0 + tl.math.erf(x * 0.7071067811865476))
    tl.store(out_ptr + offsets, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.zeros_like(x)
        n_elements = x.shape[-1]  # BUG: should be x.numel()
        BLOCK_SIZE = 1024
        grid = (triton.cdiv(x.numel(), BLOCK_SIZE),)
        gelu_kernel[grid](x, out, n_elements, BLOCK_SIZE=BLOCK_SIZE)
        return out
