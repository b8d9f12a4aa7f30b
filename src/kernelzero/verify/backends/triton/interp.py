"""Guards for Triton's CPU interpreter: bounds checks, device asserts, launch counts, bf16 flag.

Used inside the sandboxed candidate child process that runs with ``TRITON_INTERPRET=1`` (no GPU).
Call :func:`install_guards` once, after ``import triton`` and before the candidate module is
imported; give kernels inputs made with :func:`padded_clone`.

Why: the interpreter computes with raw host pointers and checks nothing. An unmasked load past the
end of a tensor silently reads neighbouring heap memory (an off-by-one mask passes), a bad store
corrupts the heap (abort or hang later), ``tl.device_assert`` is skipped, and bf16 arithmetic is wrong.

What is guarded
- Every active lane of every load, store, atomic_rmw and atomic_cas, including block pointers and
  tensor descriptors (they lower to masked loads/stores), must lie inside the *view* of the tensor
  argument the pointer was derived from. Provenance follows pointer arithmetic, splat, broadcast,
  expand_dims, reshape, trans, select, cat, join/split, bitcast, block pointers and descriptors.
  A pointer whose origin is lost (int-to-pointer casts, pointers loaded from memory, ``.T`` of a
  pointer block, ``tl.where`` between two arguments) must lie inside the view of *some* tensor
  argument; :func:`padded_clone` leaves gaps between inputs so that this weaker check still catches
  overruns of up to ``guard_bytes``. A violation raises :class:`OutOfBoundsError` before the access,
  which the interpreter re-raises as ``InterpreterError`` carrying the message.
- ``tl.device_assert`` fires (``InterpreterOptions(debug=True)``). Integer-overflow sanitizing,
  which Triton ties to debug mode, stays off: it flags int32 arithmetic that wraps on purpose
  (hashes), which a GPU build without debug accepts.
- Completed launches are counted per kernel name; bf16 tensor arguments are noted.
- ``@triton.autotune`` with several configs runs each config once, in order, and keeps the first
  (the interpreter has no benchmarker); those tuning runs are bounds-checked but not counted.

What is not guarded
- Data races, missing barriers, launch-configuration limits: programs run one after another in one
  thread, so races never show.
- GPU-only compile errors (``tl.dot`` with K < 16, shared memory, registers): see ``triton_compile``.
- bf16 numerics (``LaunchLog.saw_bf16`` says when results cannot be trusted), TF32 in ``tl.dot``.
- Reads of uninitialised memory inside a tensor (``torch.empty`` outputs), and memory touched by
  the candidate's host-side Python code.

The patches replace private interpreter internals of Triton 3.6 / 3.7; a missing internal raises
:class:`InterpreterInternalsError` naming it, rather than running unchecked.

How to run: see ``tests/verify/test_triton_interp.py``.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from kernelzero.verify.backends.triton.bounds import LaunchState, OutOfBoundsError, check_access  # noqa: F401 (re-export)

_TAG = "_kz_extent"  # attribute set on interpreter TensorHandles: the Extent a pointer came from
_GUARD_ALIGN = 64  # bytes; keeps padded views as aligned as a fresh torch allocation


@dataclass
class LaunchLog:
    """Kernel launches seen by the interpreter since install (or the last reset)."""

    counts: dict[str, int] = field(default_factory=dict)  # kernel name -> completed launches
    saw_bf16: bool = False  # some launch took a bf16 tensor: interpreter results are untrustworthy

    def reset(self) -> None:
        self.counts.clear()
        self.saw_bf16 = False

    def total(self) -> int:
        return sum(self.counts.values())


class InterpreterInternalsError(RuntimeError):
    """This Triton's interpreter lacks an internal that the guards patch."""


_STATE = LaunchState()
_LOG: LaunchLog | None = None


def padded_clone(t: torch.Tensor, guard_bytes: int = 4096) -> torch.Tensor:
    """Copy CPU tensor ``t`` into a contiguous view sitting between two unused guard gaps.

    The gaps belong to no argument's view, so an overrun of up to ``guard_bytes`` cannot land in a
    neighbouring argument. The gaps are filled with 0xFF bytes (NaN for floats). Example:
    ``padded_clone(torch.ones(3)).untyped_storage().nbytes() == 3 * 4 + 2 * 4096``.
    """
    if t.device.type != "cpu":
        raise ValueError(f"padded_clone takes CPU tensors, got device {t.device}")
    gap = -(-max(guard_bytes, 0) // _GUARD_ALIGN) * _GUARD_ALIGN
    nbytes = t.numel() * t.element_size()
    buf = torch.full((gap + nbytes + gap,), 0xFF, dtype=torch.uint8)
    out = buf[gap : gap + nbytes].view(t.dtype).view(t.shape)
    out.copy_(t.detach())
    return out


def install_guards(*, guard_bytes: int = 4096) -> LaunchLog:
    """Patch the interpreter (process-wide, once) and return the log of launches.

    ``guard_bytes``: a bad address within this many bytes of an argument's view is described
    relative to that argument in the error (use the ``guard_bytes`` given to :func:`padded_clone`).
    Calling again returns the same log.
    """
    global _LOG
    if _LOG is not None:
        return _LOG
    interp = _interpreter_module()
    _require(interp)
    log = LaunchLog()
    _guard_memory_ops(interp, guard_bytes)  # first: it checks signatures before patching anything
    _enable_device_assert(interp)
    _track_arguments(interp)
    _propagate_provenance(interp)
    _count_launches(interp, log)
    _autotune_without_benchmarker()
    _LOG = log
    return log


# --- interpreter internals ------------------------------------------------------------------------

_REQUIRED = (
    "GridExecutor._init_args_hst",
    "InterpretedFunction.run",
    "InterpreterBuilder.create_masked_load",
    "InterpreterBuilder.create_masked_store",
    "InterpreterBuilder.create_atomic_rmw",
    "InterpreterBuilder.create_atomic_cas",
    "InterpreterBuilder.create_addptr",
    "BlockPointerHandle.materialize_pointers",
    "TensorDescHandle.materialize_pointers",
    "TensorHandle",
    "InterpreterOptions",
    "interpreter_builder",
    "_implicit_cvt",
)


def _interpreter_module() -> Any:
    import triton

    if not triton.knobs.runtime.interpret:
        raise RuntimeError("install_guards needs TRITON_INTERPRET=1 set before @triton.jit runs")
    from triton.runtime import interpreter

    return interpreter


def _require(interp: Any) -> None:
    missing = [name for name in _REQUIRED if _lookup(interp, name) is None]
    if "debug" not in getattr(interp.InterpreterOptions, "__dataclass_fields__", {}):
        missing.append("InterpreterOptions.debug")
    if missing:
        import triton

        raise InterpreterInternalsError(
            f"triton {triton.__version__} interpreter lacks {', '.join(missing)}; bounds checks cannot be installed"
        )


def _lookup(obj: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def _enable_device_assert(interp: Any) -> None:
    fields = interp.InterpreterOptions.__dataclass_fields__
    kwargs = {"debug": True}
    if "sanitize_overflow" in fields:
        kwargs["sanitize_overflow"] = False
    interp.interpreter_builder.options = interp.InterpreterOptions(**kwargs)
    create_assert = getattr(interp.InterpreterBuilder, "create_assert", None)
    if create_assert is not None:  # only to name the failing program in the message
        interp.InterpreterBuilder.create_assert = _naming_program(create_assert)


def _naming_program(create_assert: Callable) -> Callable:

    def create_assert_with_program(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return create_assert(self, *args, **kwargs)
        except AssertionError as e:
            pid = tuple(int(i) for i in getattr(self, "grid_idx", ()) or ())
            raise AssertionError(f"device_assert failed, program_id={pid}: {e}") from None

    return create_assert_with_program


def _track_arguments(interp: Any) -> None:
    init_args = interp.GridExecutor._init_args_hst
    implicit_cvt = interp._implicit_cvt

    def _init_args_hst(self: Any, args_dev: Any, kwargs: Any) -> Any:
        args_hst, kwargs_hst = init_args(self, args_dev, kwargs)
        _STATE.begin(list(getattr(self, "arg_names", [])), list(args_hst), dict(kwargs_hst))
        return args_hst, kwargs_hst

    def _implicit_cvt(arg: Any) -> Any:
        out = implicit_cvt(arg)  # recurses through this module global, so tuples are tagged too
        if hasattr(arg, "data_ptr") and hasattr(out, "handle"):
            setattr(out.handle, _TAG, _STATE.extent_for(arg))
        return out

    interp.GridExecutor._init_args_hst = _init_args_hst
    interp._implicit_cvt = _implicit_cvt


def _guard_memory_ops(interp: Any, guard_bytes: int) -> None:
    builder_cls = interp.InterpreterBuilder
    specs = (
        ("create_masked_load", "load", "ptrs", "mask"),
        ("create_masked_store", "store", "ptrs", "mask"),
        ("create_atomic_rmw", "atomic_rmw", "ptr", "mask"),
        ("create_atomic_cas", "atomic_cas", "ptr", None),
    )
    guarded = {
        method: _guarded(getattr(builder_cls, method), method, kind, ptr_param, mask_param, guard_bytes)
        for method, kind, ptr_param, mask_param in specs
    }
    for method, replacement in guarded.items():
        setattr(builder_cls, method, replacement)


def _guarded(
    original: Callable, method: str, kind: str, ptr_param: str, mask_param: str | None, guard_bytes: int
) -> Callable:
    params = list(inspect.signature(original).parameters)[1:]  # drop self
    for wanted in (ptr_param, mask_param):
        if wanted is not None and wanted not in params:
            raise InterpreterInternalsError(f"InterpreterBuilder.{method} has no parameter {wanted!r}: {params}")
    ptr_at = params.index(ptr_param)
    mask_at = params.index(mask_param) if mask_param else -1

    def method_with_check(self: Any, *args: Any, **kwargs: Any) -> Any:
        ptrs = kwargs[ptr_param] if ptr_param in kwargs else args[ptr_at]
        mask = None
        if mask_param is not None:
            mask = kwargs[mask_param] if mask_param in kwargs else (args[mask_at] if mask_at < len(args) else None)
        check_access(ptrs, mask, kind, getattr(self, "grid_idx", None), guard_bytes, getattr(ptrs, _TAG, None), _STATE)
        return original(self, *args, **kwargs)

    method_with_check.__name__ = method
    return method_with_check


def _propagate_provenance(interp: Any) -> None:
    names = (
        "create_addptr",
        "create_splat",
        "create_broadcast",
        "create_expand_dims",
        "create_reshape",
        "create_trans",
        "create_select",
        "create_cat",
        "create_join",
        "create_split",
        "create_bitcast",
    )
    handle_cls = interp.TensorHandle
    for name in names:
        original = getattr(interp.InterpreterBuilder, name, None)
        if original is not None:  # a missing one only weakens provenance to "some argument"
            setattr(interp.InterpreterBuilder, name, _propagating(original, handle_cls))
    for cls in (interp.BlockPointerHandle, interp.TensorDescHandle):
        cls.materialize_pointers = _materializing(cls.materialize_pointers)


def _propagating(original: Callable, handle_cls: type) -> Callable:

    def method_with_provenance(self: Any, *args: Any, **kwargs: Any) -> Any:
        out = original(self, *args, **kwargs)
        ptr_inputs = [a for a in args if isinstance(a, handle_cls) and _is_pointer(a)]
        if ptr_inputs:
            ext = getattr(ptr_inputs[0], _TAG, None)
            if ext is not None and all(getattr(a, _TAG, None) is ext for a in ptr_inputs):
                for handle in out if isinstance(out, tuple) else (out,):
                    if isinstance(handle, handle_cls) and _is_pointer(handle):
                        setattr(handle, _TAG, ext)
        return out

    method_with_provenance.__name__ = original.__name__
    return method_with_provenance


def _materializing(original: Callable) -> Callable:

    def materialize_pointers(self: Any, *args: Any, **kwargs: Any) -> Any:
        ptrs, masks = original(self, *args, **kwargs)
        ext = getattr(self.base, _TAG, None)
        if ext is not None:
            setattr(ptrs, _TAG, ext)
        return ptrs, masks

    return materialize_pointers


def _is_pointer(handle: Any) -> bool:
    import triton.language as tl

    return isinstance(handle.dtype, tl.pointer_type)


def _count_launches(interp: Any, log: LaunchLog) -> None:
    run = interp.InterpretedFunction.run

    def counted_run(self: Any, *args: Any, grid: Any, warmup: Any, **kwargs: Any) -> Any:
        if not warmup and _any_bf16(list(args) + list(kwargs.values())):
            log.saw_bf16 = True
        out = run(self, *args, grid=grid, warmup=warmup, **kwargs)
        if not warmup and not _STATE.tuning:
            name = getattr(self.fn, "__name__", "kernel")
            log.counts[name] = log.counts.get(name, 0) + 1
        return out

    interp.InterpretedFunction.run = counted_run


def _autotune_without_benchmarker() -> None:
    from triton.runtime import autotuner

    def run_once(kernel_call: Callable[[], Any], quantiles: Any = None, **_: Any) -> list[float]:
        with _tuning():
            kernel_call()
        return [1.0, 1.0, 1.0] if quantiles else 1.0  # all equal: the first config is kept

    # Autotuner.do_bench asks the (absent) GPU driver for a benchmarker; replace it for every autotuner.
    autotuner.Autotuner.do_bench = property(lambda self: run_once)


@contextlib.contextmanager
def _tuning() -> Iterator[None]:
    _STATE.tuning += 1
    try:
        yield
    finally:
        _STATE.tuning -= 1


def _any_bf16(values: list[Any]) -> bool:
    for value in values:
        if isinstance(value, tuple) and _any_bf16(list(value)):
            return True
        if hasattr(value, "block_shape") and hasattr(value, "base") and _any_bf16([value.base]):
            return True
        dtype = getattr(value, "dtype", None)
        if hasattr(value, "data_ptr") and (dtype == torch.bfloat16 or str(dtype) in ("bf16", "bfloat16")):
            return True
    return False
