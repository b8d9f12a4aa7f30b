# task: kz-basic:level1/11_Sum_Over_Dim
# backend: triton
# expect: correct
# why: strided reduction over the middle dim: x viewed as (outer, R, inner), 2-D tiles summed over R, masked on both axes
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def sum_dim_kernel(
    x_ptr, out_ptr,
    R, INNER,
    stride_xo, stride_xr, stride_xi,
    stride_oo, stride_oi,
    BLOCK_R: tl.constexpr, BLOCK_I: tl.constexpr,
):
    pid_o = tl.program_id(0).to(tl.int64)
    pid_i = tl.program_id(1)
    offs_i = pid_i * BLOCK_I + tl.arange(0, BLOCK_I)
    mask_i = offs_i < INNER
    acc = tl.zeros([BLOCK_I], dtype=tl.float32)
    base = x_ptr + pid_o * stride_xo
    for r0 in range(0, R, BLOCK_R):
        offs_r = r0 + tl.arange(0, BLOCK_R)
        mask = (offs_r[:, None] < R) & mask_i[None, :]
        ptrs = base + offs_r[:, None].to(tl.int64) * stride_xr + offs_i[None, :] * stride_xi
        tile = tl.load(ptrs, mask=mask, other=0.0)
        acc += tl.sum(tile, axis=0)
    tl.store(out_ptr + pid_o * stride_oo + offs_i * stride_oi, acc, mask=mask_i)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dim = self.dim % x.dim()
        shape = list(x.shape)
        outer = 1
        for s in shape[:dim]:
            outer *= s
        inner = 1
        for s in shape[dim + 1:]:
            inner *= s
        R = shape[dim]
        x3 = x.contiguous().view(outer, R, inner)
        out = torch.empty((outer, inner), device=x.device, dtype=x.dtype)
        BLOCK_R, BLOCK_I = 32, 128
        grid = (outer, triton.cdiv(inner, BLOCK_I))
        sum_dim_kernel[grid](
            x3, out, R, inner,
            x3.stride(0), x3.stride(1), x3.stride(2),
            out.stride(0), out.stride(1),
            BLOCK_R=BLOCK_R, BLOCK_I=BLOCK_I, num_warps=4,
        )
        return out.view(shape[:dim] + shape[dim + 1:])
