# task: kz-basic:level1/21_GELU
# backend: triton
# attack: A12 Fallback to torch or a library, and decoy kernels
# policy: strict
# expect: torch_compute
# why: issue 25, class 4 (compute the recorder cannot see): the kernel it launches loads its input and stores nothing; the work is F.gelu in a pre-run hook the kernel was given (`add_pre_run_hook`), which Triton calls inside its launch (with the launch's own arguments: on a GPU the tensors themselves, in the interpreter host copies that are copied back). The launch wrapper paused the op recorder for all of the launch, so the hook's PyTorch compute was never seen and the strict policy said correct; only Triton's own internals may be exempt (torch_compute). Naive harness: PyTorch compute is allowed there
import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


@triton.jit
def gelu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    tl.load(x_ptr + offs, mask=offs < n, other=0.0)  # "the kernel": the hook has already written out_ptr


def _hook(x, out, *args, **kwargs):
    out.copy_(F.gelu(x))


gelu_kernel.add_pre_run_hook(_hook)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        gelu_kernel[(triton.cdiv(n, 4096),)](x, out, n, BLOCK=4096)
        return out
