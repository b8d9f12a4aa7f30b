"""Kernel languages as data: `BACKENDS`, one `kernelzero.types.Backend` record per language.

A backend is one folder here and one entry in `BACKENDS`. The record travels in every verification request, so the
judge and worker processes act on the record they were sent, not on a name. The folder (`Backend.package`) holds
modules with fixed names, imported only when needed (a language's own dependencies stay optional):

| module | what it defines | who calls it |
|---|---|---|
| `static.py` | `has_kernel(tree) -> bool`: does the syntax tree hold the language's kernel construct; optionally `violations(tree) -> list[Violation]`, the language's own rules (fallbacks) | `verify/static.py` |
| `hook.py` | `install(guards, interpret) -> hook`: counts the language's kernel launches in the worker; the hook has `guard_input(x)`, `notes()` and `bf16_seen()` | the worker |
| `without_gpu.py` (`without_gpu="compile"`) | `verify_without_gpu(task, source, backend, opts) -> Verdict` | `verify()` on a machine without a GPU |
| `compile_check.py` (`without_gpu="interpret"`) | `compile_check(judge, cand_path) -> Verdict or None`: after the interpreter passed, compile for the target GPU | the judge |
| `build.py` (`build_stage=True`) | `prebuild(source, cache, ...)`: builds a GPU-bound candidate on CPU cores | the pools |

How a new language is added, step by step: docs/architecture.md.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from kernelzero.types import Backend

BACKENDS: dict[str, Backend] = {
    "triton": Backend(
        name="triton",
        package="kernelzero.verify.backends.triton",
        kernel_hint="a Triton candidate must define @triton.jit kernels",
        without_gpu="interpret",
    ),
    "cuda": Backend(
        name="cuda",
        package="kernelzero.verify.backends.cuda",
        kernel_hint="a CUDA candidate must build kernels with load_inline",
        without_gpu="compile",
        build_stage=True,
    ),
    "helion": Backend(
        name="helion",
        package="kernelzero.verify.backends.helion",
        kernel_hint="a Helion candidate must define @helion.kernel functions called from ModelNew.forward",
        without_gpu="interpret",
    ),
}


def get_backend(name: str) -> Backend:
    """The record of backend `name`; an unknown name raises ValueError listing the known ones."""
    if name not in BACKENDS:
        raise ValueError(f"unknown backend {name!r}; choose one of {', '.join(BACKENDS)}")
    return BACKENDS[name]


def register(backend: Backend) -> None:
    """Add (or replace) a backend, for example one defined outside kernelzero or in a test."""
    BACKENDS[backend.name] = backend


def backend_module(backend: Backend, part: str) -> ModuleType:
    """The backend's module `part` (one of the fixed names above)."""
    return importlib.import_module(f"{backend.package}.{part}")
