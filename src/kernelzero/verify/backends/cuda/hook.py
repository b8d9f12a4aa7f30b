"""CUDA's worker hook: runs in the candidate's process before the candidate is imported.

- Launch counting: every callable of an extension the candidate builds with `load_inline`/`load` is wrapped, so a
  call into the candidate's own extension counts as its own kernel launch (`guards.wrap_builder`).
- The build cache (on a GPU, when the pool gave one): the candidate's `load_inline` loads the library the pool
  built for exactly its arguments, else builds privately with the same recipe (`install_cache_hook`); a private
  build is a note in the verdict.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import inspect
import json
import os
from pathlib import Path

from kernelzero.types import from_dict
from kernelzero.verify.backends.cuda.build import BuildError, build_extension, build_key, toolchain
from kernelzero.verify.backends.cuda.build_cache import BuildCache
from kernelzero.verify.backends.cuda.capture import InlineBuild, recorded


class CudaHook:
    """What the worker asks of an installed hook."""

    def guard_input(self, x):
        return x

    def notes(self) -> list[str]:
        return list(private_builds)

    def bf16_seen(self) -> bool:
        return False


def install(guards, device: str, interpret: bool) -> CudaHook:
    """Install the build cache hook (GPU only) and count calls into the candidate's extensions."""
    import torch.utils.cpp_extension as cpp

    if device.startswith("cuda") and os.environ.get("KZ_BUILD_CACHE"):
        install_cache_hook(os.environ["KZ_BUILD_CACHE"], os.path.join(os.environ["TORCH_EXTENSIONS_DIR"], "kz"))
    for attr in ("load_inline", "load"):
        setattr(cpp, attr, guards.wrap_builder(getattr(cpp, attr)))
    return CudaHook()


def load_library(name: str, library: str | Path):
    """Import a built extension module from its file, as torch's loader does."""
    spec = importlib.util.spec_from_file_location(
        name, str(library), loader=importlib.machinery.ExtensionFileLoader(name, str(library))
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


private_builds: list[str] = []  # worker side: load_inline calls the shared cache could not answer, and why


def tools_digest() -> str:
    """A short hash of `toolchain()`, to tell from a note whether two processes keyed builds alike."""
    return hashlib.sha256(json.dumps(toolchain(), sort_keys=True).encode()).hexdigest()[:8]


def install_cache_hook(cache_dir: str | Path, private_dir: str | Path) -> None:
    """Make `load_inline` use prebuilt libraries from `cache_dir`, else build into `private_dir`.

    Runs in the candidate's worker before the candidate imports (and before the guards wrap `load_inline`).
    """
    import torch.utils.cpp_extension as ce

    original = ce.load_inline
    shared = BuildCache(cache_dir)
    private = BuildCache(private_dir)
    signature = inspect.signature(original)

    def load_inline(*args, **kwargs):
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        arguments = dict(bound.arguments)
        if (
            arguments.get("sycl_sources")
            or arguments.get("build_directory")
            or arguments.get("is_python_module") is False
        ):
            return original(*args, **kwargs)  # what the recipe does not cover: torch builds it
        try:
            build = from_dict(InlineBuild, recorded(arguments))
            key = build_key(build, toolchain())
        except Exception:  # an argument torch would reject: let torch say so
            return original(*args, **kwargs)
        try:
            lib = shared.get(key)
        except OSError as exc:
            lib, why = None, f"shared cache unreadable: {exc.strerror}"
        else:
            why = "not in the shared cache"
        if lib is None:
            private_builds.append(f"{build.name} built privately ({why}; key {key[:12]}, tools {tools_digest()})")
            result = build_extension(build, private, tools=toolchain(), pch_root=shared.root, build_pch=False)
            if not result.ok:
                raise BuildError(f"Error building extension '{build.name}':\n{result.log[-6000:]}")
            lib = Path(result.library)
        return load_library(build.name, lib)

    ce.load_inline = load_inline
