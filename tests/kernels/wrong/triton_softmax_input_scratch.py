# task: kz-basic:level1/15_Softmax
# backend: triton
# expect: input_mutated
# why: right softmax values, but pass 2 stores exp(x - max) back into the input row as scratch "to avoid recomputing exp"
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def softmax_kernel(x_ptr, out_ptr, stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * stride
    o_row = out_ptr + row * stride
    # pass 1: row max
    m = tl.full([BLOCK], -float("inf"), tl.float32)
    for off in range(0, n_cols, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        m = tl.maximum(m, tl.load(x_row + cols, mask=cols < n_cols, other=-float("inf")))
    row_max = tl.max(m, axis=0)
    # pass 2: exponentials, kept in the input buffer, and their sum
    s = tl.zeros([BLOCK], dtype=tl.float32)
    for off in range(0, n_cols, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        mask = cols < n_cols
        e = tl.exp(tl.load(x_row + cols, mask=mask, other=-float("inf")) - row_max)
        tl.store(x_row + cols, e, mask=mask)
        s += e
    inv = 1.0 / tl.sum(s, axis=0)
    # pass 3: normalise the stored exponentials
    for off in range(0, n_cols, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        mask = cols < n_cols
        tl.store(o_row + cols, tl.load(x_row + cols, mask=mask, other=0.0) * inv, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, logits: torch.Tensor) -> torch.Tensor:
        x = logits.contiguous()
        out = torch.empty_like(x)
        n_rows, n_cols = x.shape
        softmax_kernel[(n_rows,)](x, out, x.stride(0), n_cols, BLOCK=1024)
        return out
