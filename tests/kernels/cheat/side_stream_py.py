# task: kz-basic:level1/21_GELU
# backend: triton
# attack: A17 Stream injection
# policy: kernelbench
# naive: gpu
# expect: unconfirmed_speedup
# max-speedup: 1.2
# expect-cpu: skip
# sizes: bench
# why: launches the kernel on a private torch.cuda.Stream and never joins it back, so CUDA events on the current stream time only the launch (KernelBench's own non_default_stream fixture); under the kernelbench policy (event time only) the speedup looks huge and must fail a stricter re-verification that times with a device-wide synchronise (CPU: the fast path needs CUDA)
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def gelu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    tl.store(out_ptr + offs, 0.5 * x * (1.0 + tl.math.erf(x * 0.7071067811865476)), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.side = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        grid = (triton.cdiv(n, 4096),)
        if x.is_cuda:
            if self.side is None:
                self.side = torch.cuda.Stream()
            self.side.wait_stream(torch.cuda.current_stream())  # inputs are ready; nothing waits for the result
            with torch.cuda.stream(self.side):
                gelu_kernel[grid](x, out, n, BLOCK=4096)
        else:
            gelu_kernel[grid](x, out, n, BLOCK=4096)
        return out
