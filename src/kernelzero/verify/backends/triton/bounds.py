"""Bounds checking for Triton's interpreter: the extents of a launch's tensor arguments and the check.

Pure bookkeeping, no interpreter internals: `triton_interp.py` records each launch's tensor
arguments in a `LaunchState` and calls `check_access` before every load, store and atomic. An
extent is a tensor's *view* (first element to one past the last), never its whole storage, so the
gaps `padded_clone` leaves around inputs count as out of bounds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch


class OutOfBoundsError(RuntimeError):
    """A kernel touched memory outside the tensor arguments it was given."""


@dataclass(frozen=True)
class Extent:
    name: str  # argument name as the kernel declares it ("x_ptr", "desc.base", "ptrs[1]")
    lo: int  # first byte of the view
    hi: int  # one past the last byte of the view
    itemsize: int  # bytes per element


class LaunchState:
    """Tensor arguments of the launch being interpreted (one at a time: the interpreter is serial)."""

    def __init__(self) -> None:
        self.extents: list[Extent] = []
        self.by_id: dict[int, Extent] = {}
        self.tuning = 0  # > 0 while the autotuner runs configs: launches are not counted

    def begin(self, arg_names: list[str], args: list[Any], kwargs: dict[str, Any]) -> None:
        self.extents, self.by_id = [], {}
        for name, arg in zip(arg_names, args):
            self._visit(name, arg)
        for name, arg in kwargs.items():
            self._visit(name, arg)

    def _visit(self, name: str, arg: Any) -> None:
        if isinstance(arg, tuple):
            for i, item in enumerate(arg):
                self._visit(f"{name}[{i}]", item)
        elif hasattr(arg, "block_shape") and hasattr(arg, "base"):  # TensorDescriptor
            self._visit(f"{name}.base", arg.base)
        elif hasattr(arg, "data_ptr"):
            self.add(arg, name)

    def add(self, tensor: Any, name: str) -> Extent:
        ext = view_extent(tensor, name)
        self.extents.append(ext)
        self.by_id[id(tensor)] = ext
        return ext

    def extent_for(self, tensor: Any) -> Extent:
        return self.by_id.get(id(tensor)) or self.add(tensor, "tensor argument")


def view_extent(tensor: Any, name: str) -> Extent:
    base = tensor if isinstance(tensor, torch.Tensor) else getattr(tensor, "base", tensor)  # TensorWrapper
    lo, itemsize = base.data_ptr(), base.element_size()
    if base.numel() == 0:
        return Extent(name, lo, lo, itemsize)
    last = sum((size - 1) * stride for size, stride in zip(base.shape, base.stride()))  # torch strides are >= 0
    return Extent(name, lo, lo + (last + 1) * itemsize, itemsize)


def check_access(
    ptrs: Any, mask: Any, kind: str, program_id: Any, guard_bytes: int, own: Extent | None, state: LaunchState
) -> None:
    """Raise OutOfBoundsError if an active lane of `ptrs` lies outside its own view (or, without one, all)."""
    addrs = np.asarray(ptrs.data).astype(np.uint64, copy=False)
    if mask is not None:
        mask_data = mask if isinstance(mask, np.ndarray) else mask.data  # block pointers pass bare arrays
        addrs = addrs[np.broadcast_to(np.asarray(mask_data, dtype=bool), addrs.shape)]
    addrs = addrs.reshape(-1)
    if addrs.size == 0:
        return
    width = max(1, ptrs.get_element_ty().primitive_bitwidth // 8)
    allowed = [own] if own is not None else state.extents
    ok = np.zeros(addrs.shape, dtype=bool)
    for ext in allowed:
        ok |= (addrs >= np.uint64(ext.lo)) & (addrs + np.uint64(width) <= np.uint64(ext.hi))
    if not ok.all():
        raise OutOfBoundsError(_describe(kind, addrs[~ok], addrs.size, own, program_id, guard_bytes, state))


def _describe(
    kind: str,
    bad: np.ndarray,
    n_active: int,
    own: Extent | None,
    program_id: Any,
    guard_bytes: int,
    state: LaunchState,
) -> str:
    where = f"argument '{own.name}'" if own is not None else "every tensor argument"
    pid = tuple(int(i) for i in program_id) if program_id is not None else "?"
    text = f"out-of-bounds {kind}: {bad.size} of {n_active} active lane(s) outside {where}, program_id={pid}"
    first = int(bad.min())
    ref = own if own is not None else _nearest(first, guard_bytes, state)
    if ref is None:
        return f"{text}; lowest bad address is not within {guard_bytes} bytes of any tensor argument"
    offset = first - ref.lo
    n_elems = (ref.hi - ref.lo) // ref.itemsize
    return (
        f"{text}; lowest bad lane is element {offset // ref.itemsize} (byte offset {offset}) "
        f"of '{ref.name}', which has {n_elems} element(s)"
    )


def _nearest(addr: int, guard_bytes: int, state: LaunchState) -> Extent | None:
    best, best_gap = None, guard_bytes + 1
    for ext in state.extents:
        gap = ext.lo - addr if addr < ext.lo else max(0, addr - ext.hi + 1)
        if gap < best_gap:
            best, best_gap = ext, gap
    return best
