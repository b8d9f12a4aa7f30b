"""Helion: kernels written as `@helion.kernel` functions, PyTorch ops inside `hl.tile` loops, compiled to Triton.

Why Helion as the third language (checked 2026-12-01, against TileLang 0.1.15 and CuTe DSL 4.8.1):
- **It installs beside the pinned CPU torch.** `pip install --dry-run -c constraints.txt helion==1.5.1` adds a
  4.7 MB pure-Python wheel (1.5.0, the pinned one since, 4.3 MB) and scikit-learn/scipy/filecheck, and leaves torch 2.13.0+cpu and Triton 3.7.1 as they
  are (its metadata names no torch or Triton). TileLang's wheel is 50 MB plus a 29 MB z3 solver, and CuTe DSL's
  is 92 MB of CUDA libraries: neither fits with room in the 64 MiB a device call carries, and neither runs on CPU.
- **It reaches the H200.** The GPU machine's image has torch 2.11 and Triton 3.6, and every dependency but
  `helion` and `filecheck` (together under 5 MB as wheels). Helion gates its optional features on torch >= 2.11
  and Triton >= 3.5 at run time (`helion/_compat.py`), but 1.5.1 imports `IntelGPUError` from torch's
  `_inductor.runtime.triton_compat`, which torch 2.11 lacks: helion 1.5.0 is the version for both torch 2.11 and
  2.13 (README, "Dependencies", has the check); the GPU run confirms the rest (bench/verify.md).
- **It runs without a GPU.** Helion generates ordinary `@triton.jit` kernels, so under `TRITON_INTERPRET=1` they
  run in Triton's interpreter on CPU tensors, with kernelzero's bounds checks; and without the interpreter, the
  same kernels compile for sm_90 through Triton's compile check (a stub driver, no GPU). A CPU verdict therefore
  went as far as a Triton one: run and compared in the interpreter, then compiled for the GPU.

What the folder holds:
- `static.py`: the kernel construct (`@helion.kernel`, `@helion.jit`, any alias) and Helion's rules: no PyTorch
  compute in `forward` or in a kernel's host code (outside `hl.tile` / `hl.grid`), a kernel reachable from
  `ModelNew.forward`, no autotuning, no ref mode, no Helion/Triton settings through the environment.
- `hook.py`: in the worker, autotuning off (`HELION_AUTOTUNE_EFFORT=none`, `autotune()` refused), one config per
  compiled kernel, the op recorder paused while Helion traces; launches are counted by the Triton hook.
- `compile_check.py`: without a GPU, Triton's sm_90 compile check of the generated kernels.

Build cost: Helion traces and generates code on the first call with a new shape, inside the first correctness
trial (the verdict's `first_call` stage), like Triton's JIT; the warm-up calls before timing run compiled code.
"""
