"""Compile-check Triton kernels for a real GPU target (default sm_90) on a machine without a GPU.

The CPU interpreter accepts kernels that no GPU compiler would (``tl.dot`` with K < 16, Python
constructs inside a kernel) and refuses some that a GPU runs (libdevice, inline asm). This check
catches the first kind and clears the second: it runs the candidate's forward once with a stub
CUDA driver active, and every ``@triton.jit`` launch made meanwhile is compiled to cubin with the
real argument types, constexprs and ``num_warps``/``num_stages``, but not launched. An
``@triton.autotune`` kernel compiles every config it would benchmark (nothing is timed).

Run it in its own child process with ``TRITON_INTERPRET`` unset (the driver stub is process-wide and
non-interpreted ``@triton.jit`` needs its source in a real .py file), with CPU tensors::

    records = compile_launches(lambda: module.forward(*inputs))

The forward's outputs are meaningless (kernels do not run). Set ``TRITON_CACHE_DIR`` (Triton's own
variable) in the child to keep compiled kernels out of the home directory.

Not checked here: anything at run time (results, out-of-bounds accesses, races), resource limits
other than shared memory, and kernels the forward does not launch on the given inputs.
"""

from __future__ import annotations

import contextlib
import inspect
import re
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Largest dynamic shared memory per block (bytes), by compute capability; a kernel that needs more
# fails at launch with OutOfResources.
MAX_SHARED_BYTES = {80: 166912, 86: 101376, 87: 166912, 89: 101376, 90: 232448, 100: 232448, 120: 101376}
_ERROR_LINES = 30
_ERROR_CHARS = 4000


@dataclass(frozen=True)
class CompileRecord:
    """One compile of one kernel specialization."""

    kernel: str  # the @triton.jit function's name
    config: str  # constexprs and compile options, e.g. "BLOCK=1024 num_warps=4 num_stages=3"
    ok: bool  # compiled to cubin and fits the target's shared memory
    error: str  # compiler message (first lines), "" when ok
    shared_bytes: int | None  # shared memory per block; None when the compile failed
    registers: int | None  # registers per thread (cuobjdump); None when unknown
    stack_bytes: int | None  # per-thread stack frame, where register spills go (cuobjdump); None when unknown
    compile_seconds: float  # wall time of this compile (near 0 when Triton's cache had it)


class StubCudaDriver:
    """Enough of Triton's CUDA driver to compile (never to launch) for ``GPUTarget("cuda", arch, 32)``."""

    def __init__(self, arch: int = 90) -> None:
        from triton.backends.compiler import GPUTarget

        self.target = GPUTarget("cuda", arch, 32)

    def get_current_target(self) -> Any:
        return self.target

    def get_current_device(self) -> int:
        # JIT caches are keyed by device: one id per arch keeps kernels compiled for other targets apart.
        return self.target.arch

    def get_current_stream(self, device: int | None = None) -> int:
        return 0

    def get_active_torch_device(self) -> Any:
        import torch

        return torch.device("cpu")

    def get_device_interface(self) -> Any:
        import torch

        return torch.cuda

    def get_benchmarker(self) -> Callable[..., Any]:
        return _run_once

    def is_active(self) -> bool:
        return True


@contextlib.contextmanager
def stub_gpu_driver(arch: int = 90) -> Iterator[StubCudaDriver]:
    """Make ``triton.runtime.driver.active`` a :class:`StubCudaDriver` inside the block."""
    from triton.runtime.driver import driver

    previous = getattr(driver, "_active", None)
    stub = StubCudaDriver(arch)
    driver.set_active(stub)
    try:
        yield stub
    finally:
        driver.set_active(previous)


def compile_launches(
    run_forward: Callable[[], object], *, arch: int = 90, resource_usage: bool = True
) -> list[CompileRecord]:
    """Run ``run_forward()`` with launches turned into compiles for sm_``arch``; one record per compile.

    A failed compile is recorded and the launch returns None, so the forward goes on to its other
    kernels. An exception raised by the forward itself propagates. ``resource_usage`` runs
    Triton's bundled cuobjdump for registers and stack (about 0.1 s per kernel).
    """
    import triton

    if triton.knobs.runtime.interpret:
        raise RuntimeError("compile_launches needs TRITON_INTERPRET unset: interpreted kernels never compile")
    records: list[CompileRecord] = []
    with stub_gpu_driver(arch), _compile_instead_of_launch(records, arch, resource_usage):
        run_forward()
    return records


@contextlib.contextmanager
def _compile_instead_of_launch(records: list[CompileRecord], arch: int, resource_usage: bool) -> Iterator[None]:
    from triton.runtime.autotuner import Autotuner
    from triton.runtime.jit import JITFunction

    for name in ("run", "_do_compile"):
        if not callable(getattr(JITFunction, name, None)):
            raise RuntimeError(f"triton.runtime.jit.JITFunction.{name} not found: cannot compile launches")
    saved = {name: JITFunction.__dict__[name] for name in ("run", "_do_compile")}
    saved_bench = Autotuner.__dict__.get("do_bench")
    JITFunction._do_compile = _recording_compile(saved["_do_compile"], records, arch, resource_usage)
    JITFunction.run = _compiling_run(saved["run"], records)
    Autotuner.do_bench = property(lambda self: _run_once)  # also overrides do_bench= / cuda graphs
    try:
        yield
    finally:
        JITFunction.run, JITFunction._do_compile = saved["run"], saved["_do_compile"]
        if saved_bench is not None:
            Autotuner.do_bench = saved_bench
        else:
            del Autotuner.do_bench


def _compiling_run(original: Callable, records: list[CompileRecord]) -> Callable:

    def run(self: Any, *args: Any, grid: Any, warmup: Any, **kwargs: Any) -> Any:
        try:
            return original(self, *args, grid=grid, warmup=True, **kwargs)
        except Exception as e:  # noqa: BLE001 - every failure becomes a record
            if not getattr(e, "_kz_recorded", False):  # failed before compiling: bad arguments
                _append(
                    records,
                    CompileRecord(_name(self), _options_text(kwargs), False, _error_text(e), None, None, None, 0.0),
                )
            return None

    return run


def _recording_compile(original: Callable, records: list[CompileRecord], arch: int, resource_usage: bool) -> Callable:
    signature = inspect.signature(original)

    def _do_compile(self: Any, *args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(self, *args, **kwargs).arguments
        config = _config_text(self, bound.get("constexprs") or {}, bound.get("options"))
        start = time.perf_counter()
        try:
            kernel = original(self, *args, **kwargs)
        except Exception as e:
            _append(
                records,
                CompileRecord(
                    _name(self), config, False, _error_text(e), None, None, None, time.perf_counter() - start
                ),
            )
            e._kz_recorded = True  # type: ignore[attr-defined]
            raise
        seconds = time.perf_counter() - start
        if kernel is not None:
            _append(records, _success_record(_name(self), config, kernel, seconds, arch, resource_usage))
        return kernel

    return _do_compile


def _success_record(
    name: str, config: str, kernel: Any, seconds: float, arch: int, resource_usage: bool
) -> CompileRecord:
    shared = int(getattr(kernel.metadata, "shared", 0) or 0)
    registers, stack = _resource_usage(kernel.asm.get("cubin")) if resource_usage else (None, None)
    limit = MAX_SHARED_BYTES.get(arch)
    if limit is not None and shared > limit:
        error = f"needs {shared} bytes of shared memory; sm_{arch} allows at most {limit} per block"
        return CompileRecord(name, config, False, error, shared, registers, stack, seconds)
    return CompileRecord(name, config, True, "", shared, registers, stack, seconds)


def _append(records: list[CompileRecord], record: CompileRecord) -> None:
    if not any(r.kernel == record.kernel and r.config == record.config and r.error == record.error for r in records):
        records.append(record)


def _run_once(kernel_call: Callable[[], Any], quantiles: Any = None, **_: Any) -> Any:
    """Stand-in benchmarker: one call, equal times for all, so an autotuner keeps its first config."""
    kernel_call()
    return [1.0, 1.0, 1.0] if quantiles else 1.0


def _name(fn: Any) -> str:
    return getattr(getattr(fn, "fn", None), "__name__", None) or str(fn)


def _config_text(fn: Any, constexprs: dict, options: Any) -> str:
    names = [p.name for p in getattr(fn, "params", [])]
    parts = []
    for path, value in constexprs.items():
        path = path if isinstance(path, tuple) else (path,)
        head = names[path[0]] if isinstance(path[0], int) and path[0] < len(names) else str(path[0])
        parts.append(head + "".join(f"[{i}]" for i in path[1:]) + f"={value}")
    for opt in ("num_warps", "num_stages", "num_ctas", "maxnreg"):
        value = getattr(options, opt, None)
        if value is not None and not (opt == "num_ctas" and value == 1):
            parts.append(f"{opt}={value}")
    return " ".join(parts)


def _options_text(kwargs: dict) -> str:
    return " ".join(f"{k}={v}" for k, v in kwargs.items() if isinstance(v, (int, float, str, bool)))


def _error_text(e: BaseException) -> str:
    text = f"{type(e).__name__}: {e}"
    lines = text.strip().splitlines()
    if len(lines) > _ERROR_LINES:
        lines = lines[:_ERROR_LINES] + [f"... ({len(lines) - _ERROR_LINES} more lines)"]
    text = "\n".join(lines)
    return text if len(text) <= _ERROR_CHARS else text[:_ERROR_CHARS] + " ..."


def _resource_usage(cubin: bytes | None) -> tuple[int | None, int | None]:
    """Registers and stack bytes per thread from ``cuobjdump --dump-resource-usage``; Nones if unavailable."""
    import triton

    tool = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    if not cubin or not tool.exists():
        return None, None
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        try:
            out = subprocess.run(
                [str(tool), "--dump-resource-usage", f.name], capture_output=True, text=True, timeout=60
            ).stdout
        except (OSError, subprocess.SubprocessError):
            return None, None
    reg, stack = re.search(r"REG:(\d+)", out), re.search(r"STACK:(\d+)", out)
    return (int(reg.group(1)) if reg else None), (int(stack.group(1)) if stack else None)
