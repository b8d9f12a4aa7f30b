"""CUDA through `torch.utils.cpp_extension.load_inline`.

- `static.py`: the kernel construct (a `load_inline`/`load` call or an import from `cpp_extension`).
- `hook.py`: the worker's launch counting (calls into the candidate's own extensions) and the build cache hook.
- `capture.py`: a candidate's `load_inline` calls, captured in a sandboxed child without building.
- `build.py`, `build_cache.py`, `split.py`, `flags.py`, `pch.py`: the pool's fast, cached builds.
- `source.py`, `without_gpu.py`, `stubs/`: without a GPU, the captured sources compiled with nvcc (`compiled`).
"""
