"""What a standby worker does before it is given a candidate (verify/judge/standby.py): the one-time costs
of its first GPU call, paid while no sample waits for it.

The worker also runs the guards' `warm_dispatch()` then (the first dispatch mode's imports); `warm_gpu()`
creates the CUDA context and compiles and launches one trivial Triton kernel, which loads
Triton's compiler and builds its driver helpers into the worker's own (fresh) Triton cache. The reference's process
warms CUDA alone (`triton=False`): the task's PyTorch ops use no Triton, and its Triton warm-up was the largest part
of the 2.5 CPU-s its warm-up took in a GRPO step's verifications on the H200 (2026-12-04, bench/service.md), on a host
where CPU bounds the step. A reference that does use Triton (a compiled baseline) pays that once, cold. Nothing here
changes what a candidate's kernels compile to or how they are checked or timed: the candidate's own
kernels are compiled and launched later as in a cold worker (its JIT compile still counts in its
`first_call`), and the guards are installed afterwards, at import, as always.
"""

from __future__ import annotations

import time

import torch

_KERNEL: list = []  # the warm-up kernel, defined on first use: a fork server imports this module before it knows
# whether its workers interpret Triton (TRITON_INTERPRET must be set before triton.language is imported)


def _touch_kernel():
    """The trivial Triton kernel (None without Triton)."""
    if not _KERNEL:
        try:
            from kernelzero.verify.worker.warm_kernel import kz_warm_touch
        except ImportError:  # Triton is optional: CUDA alone is warmed
            kz_warm_touch = None
        _KERNEL.append(kz_warm_touch)
    return _KERNEL[0]


def warm_gpu(triton: bool = True) -> str:
    """Warm CUDA, and Triton when installed and `triton`; returns a short note of what took how long."""
    start = time.perf_counter()
    x = torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    cuda_s = time.perf_counter() - start
    if not triton:
        return f"warm-up: CUDA {cuda_s:.2f} s; Triton not warmed"
    kernel = _touch_kernel()
    if kernel is None:
        return f"warm-up: CUDA {cuda_s:.2f} s; no Triton"
    kernel[(1,)](x)
    torch.cuda.synchronize()
    if x.item() != 1.0:
        raise RuntimeError("the warm-up kernel computed a wrong value")
    return f"warm-up: CUDA {cuda_s:.2f} s, Triton {time.perf_counter() - start - cuda_s:.2f} s"
