# task: kz-basic:level1/24_LeakyReLU
# backend: triton
# expect: correct
# why: LeakyReLU(0.1) elementwise with the slope passed as a runtime scalar; tail block masked
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def leaky_relu_kernel(x_ptr, y_ptr, n_elements, negative_slope, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid.to(tl.int64) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.where(x >= 0, x, x * negative_slope)
    tl.store(y_ptr + offsets, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, negative_slope: float):
        super().__init__()
        self.negative_slope = float(negative_slope)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        BLOCK_SIZE = 2048
        grid = lambda meta: (triton.cdiv(n, meta["BLOCK_SIZE"]),)
        leaky_relu_kernel[grid](x, y, n, self.negative_slope, BLOCK_SIZE=BLOCK_SIZE, num_warps=8)
        return y
