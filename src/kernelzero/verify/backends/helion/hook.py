"""Helion's worker hook: runs in the candidate's process before the candidate is imported.

Helion compiles each `@helion.kernel` to a Triton kernel plus a host function, and launches it through
Triton's `JITFunction.run` (`InterpretedFunction.run` under `TRITON_INTERPRET=1`). So launch counting, the
interpreter's bounds checks and the sm_90 compile check are the Triton hook's (`backends/triton/hook.py`, which
the judge installs in every worker). What this hook adds, without importing Helion (20 s of imports a Triton or
CUDA candidate should not pay; Helion is patched when the candidate imports it):

- **no autotuning**: `HELION_AUTOTUNE_EFFORT=none` (Helion's own setting) before Helion is imported, so a kernel
  without `config=` runs Helion's default config, and `autotune` / `autotune_multi` refuse to run: an autotuner
  runs candidate code hundreds of times and picks a config on timings of its own;
- **one config per compiled kernel**: `BoundKernel.set_config` refuses a config other than the one the kernel
  already ran, so the config the judge times is the config it checked;
- **tracing is not PyTorch compute**: Helion traces a kernel's body with PyTorch ops (on fake tensors) the first
  time it sees a shape; the op recorder is paused while Helion binds and compiles (`Kernel.bind`,
  `BoundKernel.ensure_config_exists`), as it is inside a launch. The kernel's host code (outside `hl.tile`)
  runs unpaused, so PyTorch compute there is seen;
- **compile errors**: an error of Helion's compiler (`helion.exc.*`: a misspelt op, an op it cannot lower)
  while it binds or compiles is raised as `CompilationError`, so the verdict is `compile_error` on every machine;
- **interpreter math**: in an interpreted worker, the libdevice functions Helion's kernels call (erf, tanh, pow
  ...) written in operations Triton's interpreter runs (`libdevice.py`).

All of this is a first filter inside the candidate's process; the judge's comparison and clock do not depend on it.
"""

from __future__ import annotations

import functools
import importlib.abc
import importlib.machinery
import os
import sys

TARGET = "helion.runtime.kernel"  # defines Kernel and BoundKernel
COMPILE_STEPS = (("Kernel", "bind"), ("Kernel", "_bind"), ("BoundKernel", "ensure_config_exists"))
REFUSED = (("Kernel", "autotune"), ("Kernel", "autotune_multi"), ("BoundKernel", "autotune"))
SETTINGS = {"HELION_AUTOTUNE_EFFORT": "none"}  # Helion's own environment settings, set before its import
UNSET = ("HELION_INTERPRET", "HELION_FORCE_AUTOTUNE")  # ref mode runs the body as eager PyTorch


class AutotuneRefused(RuntimeError):
    """Raised when a candidate (or Helion for it) starts autotuning inside the verifier."""


class HelionHook:
    """What the worker asks of an installed hook; `patched` once the candidate imported Helion."""

    def __init__(self) -> None:
        self.patched = False

    def guard_input(self, x):
        return x  # the Triton hook pads inputs for the interpreter

    def notes(self) -> list[str]:
        if not self.patched:
            return []
        return ["Helion: autotuning off; each kernel runs its config= (or Helion's default config)"]

    def bf16_seen(self) -> bool:
        return False  # the Triton hook reports the interpreter's launches


class CompilationError(RuntimeError):
    """Helion could not trace or generate a kernel (the worker's `classify` maps this name to `compile_error`)."""


def compile_step(fn, guards):
    """`fn` (a step of Helion's compiler) with the op recorder paused while it runs (re-entrant), and Helion's own
    errors (`helion.exc.*`) raised as `CompilationError`."""

    @functools.wraps(fn)
    def call(*args, **kwargs):
        recorder = guards.recorder
        if recorder is not None:
            recorder.paused += 1
        try:
            return fn(*args, **kwargs)
        except Exception as exc:
            if type(exc).__module__.startswith("helion.exc") and not isinstance(exc, CompilationError):
                raise CompilationError(f"Helion could not compile the kernel: {exc}") from exc
            raise
        finally:
            if recorder is not None:
                recorder.paused -= 1

    return call


def refused(name: str):
    """A replacement for an autotuning entry point that raises `AutotuneRefused`."""

    def call(*args, **kwargs):
        raise AutotuneRefused(
            f"Helion's {name}() was called: autotuning is off in verification; give each kernel one "
            "config=helion.Config(...) (a list of several configs is autotuned), or none for Helion's default"
        )

    return call


def one_config(set_config):
    """`BoundKernel.set_config` that keeps the first config a compiled kernel got."""

    @functools.wraps(set_config)
    def call(self, config, *args, **kwargs):
        current = getattr(self, "_config", None)
        if current is not None and str(current) != str(self._normalize_config(config)):
            raise AutotuneRefused(
                f"a Helion kernel's config changed after its first call ({current} -> {config}): the config "
                "timed must be the config checked"
            )
        return set_config(self, config, *args, **kwargs)

    return call


def patch(module, guards) -> None:
    """Patch Helion's `Kernel` / `BoundKernel` (module `helion.runtime.kernel`) as the module docstring says."""
    for cls, name in COMPILE_STEPS:
        owner = getattr(module, cls)
        setattr(owner, name, compile_step(getattr(owner, name), guards))
    for cls, name in REFUSED:
        setattr(getattr(module, cls), name, refused(name))
    bound = module.BoundKernel
    bound.set_config = one_config(bound.set_config)


class _PatchingLoader(importlib.abc.Loader):
    """A module's own loader, then `after(module)` once it has run."""

    def __init__(self, loader, after) -> None:
        self.loader, self.after = loader, after

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module) -> None:
        self.loader.exec_module(module)
        self.after(module)

    def __getattr__(self, name):  # get_source, get_filename ... as the real loader has them
        return getattr(self.loader, name)


class PatchOnImport(importlib.abc.MetaPathFinder):
    """Finds module `target` as the path finder would, and runs `after(module)` right after it executes."""

    def __init__(self, target: str, after) -> None:
        self.target, self.after = target, after

    def find_spec(self, fullname, path, target=None):
        if fullname != self.target:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is not None and spec.loader is not None:
            spec.loader = _PatchingLoader(spec.loader, self.after)
        return spec


def install(guards, device: str, interpret: bool) -> HelionHook:
    """Helion's settings and patches (applied when the candidate imports Helion; now if it is loaded)."""
    hook = HelionHook()
    os.environ.update(SETTINGS)
    for name in UNSET:
        os.environ.pop(name, None)

    interpreted = None
    if interpret:  # imported now: the candidate's import runs after the worker dropped kernelzero's modules
        from kernelzero.verify.backends.helion import libdevice as interpreted

    def after(module) -> None:
        patch(module, guards)
        if interpreted is not None:
            interpreted.install()
        hook.patched = True

    if TARGET in sys.modules:
        after(sys.modules[TARGET])
    else:
        sys.meta_path.insert(0, PatchOnImport(TARGET, after))
    return hook
