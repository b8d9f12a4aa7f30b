"""What a standby worker does before it is given a candidate (verify/judge/standby.py): the one-time costs
of its first GPU call, paid while no sample waits for it.

The worker also runs the guards' `warm_dispatch()` then (the first dispatch mode's imports); `warm_gpu()`
creates the CUDA context and compiles and launches one trivial Triton kernel, which loads
Triton's compiler and builds its driver helpers into the worker's own (fresh) Triton cache. Nothing here
changes what a candidate's kernels compile to or how they are checked or timed: the candidate's own
kernels are compiled and launched later as in a cold worker (its JIT compile still counts in its
`first_call`), and the guards are installed afterwards, at import, as always.
"""

from __future__ import annotations

import time

import torch

try:
    import triton
    import triton.language as tl
except ImportError:  # Triton is optional: CUDA alone is warmed
    triton = None
else:

    @triton.jit
    def kz_warm_touch(x_ptr):
        tl.store(x_ptr, tl.load(x_ptr) + 1)


def warm_gpu() -> str:
    """Warm CUDA (and Triton when installed); returns a short note of what took how long."""
    start = time.perf_counter()
    x = torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    cuda_s = time.perf_counter() - start
    if triton is None:
        return f"warm-up: CUDA {cuda_s:.2f} s; no Triton"
    kz_warm_touch[(1,)](x)
    torch.cuda.synchronize()
    if x.item() != 1.0:
        raise RuntimeError("the warm-up kernel computed a wrong value")
    return f"warm-up: CUDA {cuda_s:.2f} s, Triton {time.perf_counter() - start - cuda_s:.2f} s"
