# task: kz-basic:level2/8_Bias_Residual_LayerNorm
# backend: triton
# expect: correct
# why: fused h = x + bias + residual and LayerNorm(h), both returned (two outputs), one program per row, chunked passes over the row
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def add_layernorm_kernel(
    x_ptr, res_ptr, bias_ptr, w_ptr, b_ptr, h_ptr, y_ptr,
    stride_row, N, eps,
    BLOCK_N: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    base = row * stride_row
    # pass 1: mean of h = x + bias + residual
    sum_acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    for off in range(0, N, BLOCK_N):
        cols = off + tl.arange(0, BLOCK_N)
        mask = cols < N
        x = tl.load(x_ptr + base + cols, mask=mask, other=0.0)
        r = tl.load(res_ptr + base + cols, mask=mask, other=0.0)
        bb = tl.load(bias_ptr + cols, mask=mask, other=0.0)
        sum_acc += x + bb + r
    mean = tl.sum(sum_acc, axis=0) / N
    # pass 2: variance around the mean (two-pass, no E[h^2] - E[h]^2 cancellation)
    var_acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    for off in range(0, N, BLOCK_N):
        cols = off + tl.arange(0, BLOCK_N)
        mask = cols < N
        x = tl.load(x_ptr + base + cols, mask=mask, other=0.0)
        r = tl.load(res_ptr + base + cols, mask=mask, other=0.0)
        bb = tl.load(bias_ptr + cols, mask=mask, other=0.0)
        d = tl.where(mask, x + bb + r - mean, 0.0)
        var_acc += d * d
    rstd = 1.0 / tl.sqrt(tl.sum(var_acc, axis=0) / N + eps)
    # pass 3: write h and the normalised output
    for off in range(0, N, BLOCK_N):
        cols = off + tl.arange(0, BLOCK_N)
        mask = cols < N
        x = tl.load(x_ptr + base + cols, mask=mask, other=0.0)
        r = tl.load(res_ptr + base + cols, mask=mask, other=0.0)
        bb = tl.load(bias_ptr + cols, mask=mask, other=0.0)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0)
        b = tl.load(b_ptr + cols, mask=mask, other=0.0)
        h = x + bb + r
        tl.store(h_ptr + base + cols, h, mask=mask)
        tl.store(y_ptr + base + cols, (h - mean) * rstd * w + b, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, hidden: int):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(hidden))
        self.norm = nn.LayerNorm(hidden)

    def forward(self, x: torch.Tensor, residual: torch.Tensor):
        N = x.shape[-1]
        x2d = x.reshape(-1, N).contiguous()
        r2d = residual.reshape(-1, N).contiguous()
        h = torch.empty_like(x2d)
        y = torch.empty_like(x2d)
        BLOCK_N = min(triton.next_power_of_2(N), 1024)
        add_layernorm_kernel[(x2d.shape[0],)](
            x2d, r2d, self.bias, self.norm.weight, self.norm.bias, h, y,
            x2d.stride(0), N, self.norm.eps,
            BLOCK_N=BLOCK_N, num_warps=4,
        )
        return h.view_as(x), y.view_as(x)
