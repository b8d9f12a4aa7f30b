# task: kz-basic:level1/21_GELU
# backend: triton
# attack: A12 Fallback to torch or a library, and decoy kernels
# policy: strict
# expect: torch_compute
# why: a real Triton launch (a trivial copy) so launch counting is satisfied, then the actual work is torch.nn.functional.gelu; under the strict policy any PyTorch compute op inside forward must be rejected
import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def copy_kernel(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=mask, other=0.0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        staged = torch.empty_like(x)
        n = x.numel()
        copy_kernel[(triton.cdiv(n, 4096),)](x, staged, n, BLOCK=4096)  # "load into a staging buffer"
        return F.gelu(staged)
