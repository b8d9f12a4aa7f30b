# Hand-written Triton candidate for KernelBench level1/47_Sum_reduction_over_a_dimension (sum over dim 1, keepdim).
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def sum_dim1_kernel(x_ptr, out_ptr, R, C, sb, sr, BR: tl.constexpr, BC: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BC + tl.arange(0, BC)
    acc = tl.zeros([BC], tl.float32)
    for r0 in range(0, R, BR):
        rows = r0 + tl.arange(0, BR)
        x = tl.load(x_ptr + b * sb + rows[:, None] * sr + cols[None, :],
                    mask=(rows[:, None] < R) & (cols[None, :] < C), other=0.0)
        acc += tl.sum(x, 0)
    tl.store(out_ptr + b * C + cols, acc, mask=cols < C)


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        assert self.dim == 1 and x.dim() == 3
        x = x.contiguous()
        B, R, C = x.shape
        out = torch.empty(B, 1, C, device=x.device, dtype=x.dtype)
        sum_dim1_kernel[(B, triton.cdiv(C, 128))](x, out, R, C, x.stride(0), x.stride(1), BR=32, BC=128)
        return out
