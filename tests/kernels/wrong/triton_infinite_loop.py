# task: kz-basic:level1/15_Softmax
# backend: triton
# expect: timeout
# options: timeout_floor_s=4 timeout_scale=20
# why: the block-size search in forward never grows `block` (`block * 2` instead of `block *= 2`), so forward loops forever in Python
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(out_ptr, in_ptr, stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(in_ptr + row * stride + cols, mask=mask, other=-float("inf"))
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(out_ptr + row * stride + cols, e / tl.sum(e, axis=0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, logits: torch.Tensor) -> torch.Tensor:
        x = logits.contiguous()
        n_rows, n_cols = x.shape
        block = 1
        while block < n_cols:
            block * 2
        out = torch.empty_like(x)
        softmax_kernel[(n_rows,)](out, x, x.stride(0), n_cols, BLOCK=block)
        return out
