"""Triton's worker hook: runs in the candidate's process before the candidate is imported.

- Launch counting: `JITFunction.run` (on a GPU) or the interpreter's `InterpretedFunction.run` (without one) is
  wrapped so each launch of the candidate's own kernels counts (`guards.wrap_launch`). The op recorder is not paused
  for the launch: only Triton's own code is exempt (`worker/watch.py`), so PyTorch in a pre-run hook, a grid
  function or an interpreted kernel body is the candidate's.
- Without a GPU: the interpreter's bounds checks (`interp.install_guards`) and inputs with guard gaps between
  buffers (`interp.padded_clone`), and whether a launch saw bf16 (the interpreter's bf16 is unreliable).
- `gpu_compile(forward, arch)`: the compile check for the target GPU (`compile.py`), asked for by the judge's
  `compile_check.py` in a second worker without the interpreter.
"""

from __future__ import annotations

from collections.abc import Callable


class TritonHook:
    """What the worker asks of an installed hook."""

    def __init__(self, log=None, guard: Callable | None = None):
        self.log = log  # the interpreter's LaunchLog (None on a GPU)
        self.guard = guard  # padded_clone for the interpreter's inputs (None on a GPU)

    def guard_input(self, x):
        return self.guard(x) if self.guard is not None else x

    def notes(self) -> list[str]:
        return []

    def bf16_seen(self) -> bool:
        return bool(self.log and self.log.saw_bf16)


def _kernel_name(kernel) -> str:
    return getattr(kernel, "__name__", None) or getattr(getattr(kernel, "fn", None), "__name__", "kernel")


def install(guards, device: str, interpret: bool) -> TritonHook | None:
    """Count the candidate's Triton launches (and, with the interpreter, check every access's bounds)."""
    try:
        import triton.runtime.interpreter as interpreter
        import triton.runtime.jit as jit
    except ImportError:  # Triton is optional: no Triton, no Triton kernels to count
        return None
    hook = TritonHook()
    if interpret:
        from kernelzero.verify.backends.triton import interp

        hook = TritonHook(interp.install_guards(), interp.padded_clone)
    cls = interpreter.InterpretedFunction if interpret else jit.JITFunction
    cls.run = guards.wrap_launch(cls.run, _kernel_name, pause_recorder=False)  # only Triton's internals exempt
    return hook


def gpu_compile(forward: Callable, arch: int) -> list[dict]:
    """Compile every kernel `forward` launches for sm_`arch` instead of running it; one record per kernel."""
    from kernelzero.verify.backends.triton.compile import compile_launches

    records = compile_launches(forward, arch=arch, resource_usage=False)
    return [
        {"kernel": r.kernel, "config": r.config, "ok": r.ok, "error": r.error, "seconds": r.compile_seconds}
        for r in records
    ]
