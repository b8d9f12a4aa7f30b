# task: kz-basic:level1/23_Softplus
# backend: triton
# expect: runtime_error
# why: the launch passes no value for the kernel's `threshold` argument, so forward raises a TypeError
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softplus_kernel(x_ptr, y_ptr, n_elements, beta, threshold, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
    bx = beta * x
    soft = tl.log(1.0 + tl.exp(tl.minimum(bx, threshold))) / beta
    y = tl.where(bx > threshold, x, soft)
    tl.store(y_ptr + offsets, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, beta: float, threshold: float):
        super().__init__()
        self.beta = beta
        self.threshold = threshold

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        grid = (triton.cdiv(n, 1024),)
        softplus_kernel[grid](x, y, n, self.beta, BLOCK_SIZE=1024)
        return y
