# task: kz-basic:level1/21_GELU
# backend: triton
# attack: A20 Patching timers, events or statistics
# policy: strict
# options: static_checks=False
# expect: correct|unconfirmed_speedup
# max-speedup: 1.2
# expect-cpu: correct
# sizes: bench
# why: issue 26 (a reported time can never be below the judge's own bound): a correct GELU kernel that, inside its forward, walks the frames out to the worker's timed batch and records the call's start event again after its own launch, so the event interval holds none of its kernel and it reports about 0 ms a call. The static rules would refuse the frame walk, so this fixture turns them off: the judge's clock must hold alone. Every block's time in the judge's clock still holds the kernel, so the candidate's overhead exceeds the reference's by the hidden time and its times are corrected by it when that exceeds the clock's noise; where it does not (on the H200, 2026-12-04, bench-size blocks hold one 512 MB call each and the noise allowance was hundreds of microseconds a call), the 173x it then claims is over the 10x cap and a stricter second verification does not confirm it (unconfirmed_speedup). Credited no more than its honest speed either way. Naive harness: no such frame, the kernel is timed honestly
import sys

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


def _rerecord_start() -> None:
    frame = sys._getframe(1)
    while frame is not None:
        names = frame.f_locals
        if "starts" in names and "k" in names and "stream" in names:
            names["starts"][names["k"]].record(names["stream"])
            return
        frame = frame.f_back


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        gelu_kernel[(triton.cdiv(n, 4096),)](x, out, n, BLOCK=4096)
        _rerecord_start()
        return out
