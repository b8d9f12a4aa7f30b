# task: kz-basic:level1/18_RMSNorm
# backend: triton
# expect: correct
# why: RMSNorm, one program per row, two chunked passes over the hidden dim (sum of squares, then scale), masked tail
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def rmsnorm_kernel(
    x_ptr, w_ptr, y_ptr,
    stride_x_row, stride_y_row,
    n_cols, eps,
    BLOCK_SIZE: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * stride_x_row
    y_row = y_ptr + row * stride_y_row

    # pass 1: mean of squares, accumulated in fp32
    acc = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for off in range(0, n_cols, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        x = tl.load(x_row + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
        acc += x * x
    mean_sq = tl.sum(acc, axis=0) / n_cols
    rstd = 1.0 / tl.sqrt(mean_sq + eps)

    # pass 2: normalise and apply the weight
    for off in range(0, n_cols, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        mask = cols < n_cols
        x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        y = x * rstd * w
        tl.store(y_row + cols, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, hidden: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(hidden))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        x2d = x.reshape(-1, shape[-1]).contiguous()
        n_rows, n_cols = x2d.shape
        y = torch.empty_like(x2d)
        BLOCK_SIZE = min(triton.next_power_of_2(n_cols), 1024)
        rmsnorm_kernel[(n_rows,)](
            x2d, self.weight, y,
            x2d.stride(0), y.stride(0),
            n_cols, self.eps,
            BLOCK_SIZE=BLOCK_SIZE, num_warps=4,
        )
        return y.reshape(shape)
