# task: kz-basic:level1/24_LeakyReLU
# backend: triton
# expect: input_mutated
# why: computes LeakyReLU correctly but in place, writing into the input tensor and returning it
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def leaky_relu_inplace_kernel(x_ptr, n_elements, slope, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(x_ptr + offsets, tl.where(x >= 0, x, x * slope), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, negative_slope: float):
        super().__init__()
        self.negative_slope = negative_slope

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # in place: saves allocating an output of the same size
        n = x.numel()
        leaky_relu_inplace_kernel[(triton.cdiv(n, 2048),)](x, n, self.negative_slope, BLOCK_SIZE=2048)
        return x
