# task: kz-basic:level1/21_GELU
# backend: triton
# expect: crash
# expect-cpu: runtime_error
# why: launches one program per element instead of per block and loads without a mask: programs past numel/BLOCK read up to BLOCK x numel elements past the end (GPU: illegal address; CPU: bounds check)
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def gelu_kernel(x_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0).to(tl.int64)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    x = tl.load(x_ptr + offsets)  # no mask: "the grid covers the tensor exactly"
    y = 0.5 * x * (1.0 + tl.math.erf(x * 0.7071067811865476))
    tl.store(out_ptr + offsets, y, mask=offsets < n_elements)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        gelu_kernel[(n,)](x, out, n, BLOCK_SIZE=1024)
        return out
