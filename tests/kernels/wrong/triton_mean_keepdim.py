# task: kz-basic:level1/12_Mean_Over_Last_Dim
# backend: triton
# expect: shape_mismatch
# why: row means are right but returned with keepdim shape (rows, 1) instead of (rows,)
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def row_mean_kernel(x_ptr, out_ptr, stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for off in range(0, n_cols, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + row * stride + cols, mask=cols < n_cols, other=0.0)
    tl.store(out_ptr + row, tl.sum(acc, axis=0) / n_cols)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        n_rows, n_cols = x.shape
        out = torch.empty((n_rows, 1), device=x.device, dtype=x.dtype)
        row_mean_kernel[(n_rows,)](x, out, x.stride(0), n_cols, BLOCK=1024)
        return out
