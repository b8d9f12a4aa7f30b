"""Triton: kernels written with `@triton.jit`.

- `static.py`: the kernel construct (a function decorated with `jit`, `autotune` or `heuristics`).
- `hook.py`: the worker's launch counting (`JITFunction.run`, or the interpreter's launches without a GPU).
- `interp.py` + `bounds.py`: without a GPU, Triton's interpreter with a bounds check on every load and store.
- `compile.py` + `compile_check.py`: without a GPU, every launched kernel compiled for the target GPU (sm_90).
"""
