# task: kz-basic:level1/11_Sum_Over_Dim
# backend: triton
# expect: mismatch
# why: indexes x as if the reduced dim were the contiguous one ((outer, inner, R) layout): right output shape, wrong sums
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def sum_kernel(x_ptr, out_ptr, R, INNER, BLOCK_R: tl.constexpr):
    row = tl.program_id(0)  # one program per (outer, inner) output element
    o = row // INNER
    i = row % INNER
    base = x_ptr + o * R * INNER + i * R  # BUG: element (o, r, i) sits at o*R*INNER + r*INNER + i
    acc = tl.zeros([BLOCK_R], dtype=tl.float32)
    for r0 in range(0, R, BLOCK_R):
        offs = r0 + tl.arange(0, BLOCK_R)
        acc += tl.load(base + offs, mask=offs < R, other=0.0)
    tl.store(out_ptr + row, tl.sum(acc, axis=0))


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        B, R, I = x.shape
        out = torch.empty((B, I), device=x.device, dtype=x.dtype)
        sum_kernel[(B * I,)](x, out, R, I, BLOCK_R=256)
        return out
