"""GPU tensors between the judge and the candidate's worker without host copies (CUDA IPC).

A correctness trial at Level-1 bench sizes moves about a GB each way; through the host that took
seconds per trial while the sample held the GPU (bench/service.md). With CUDA IPC a trial moves no
bytes through the host: the judge lends the worker a buffer holding the inputs, and the worker lends
the judge a buffer holding its outputs. The channel (channel.py) carries the handles.

Who owns what, and why it stays safe:
- A handle opens a whole device allocation. torch's caching allocator packs many tensors into one
  allocation, so a handle to the judge's inputs taken from it could also expose the expected outputs.
  The judge therefore lends only an `Arena`: allocations of its own (`cuMemAlloc`), holding nothing
  but copies of the inputs of the current message. The judge keeps its own pristine inputs elsewhere
  and compares them with the arena after the call (inputs changed by the candidate = `input_mutated`).
- The arena's allocations are freed only after the worker has exited: freeing memory another process
  still maps is undefined behaviour in CUDA.
- Worker -> judge: the worker copies its outputs into an `Exporter` allocation and sends its handle
  with offsets. The judge treats that as untrusted data: it opens the handle, checks each announced
  range lies inside the mapped allocation (`cuMemGetAddressRange`) and copies the bytes into a tensor of
  its own before it sends anything else. The mapping stays open for the worker's next replies (closed
  when the worker is closed, or on a bad range), so the worker never frees an export allocation while it
  lives. The judge never runs code from the candidate and never uses the mapped memory but to copy from.

Records: `IpcTensor` (judge -> worker, pickled by the judge), `IpcRef` (worker -> judge, parsed from
JSON by channel.py). Uses the CUDA driver API through ctypes (libcuda.so.1, present wherever a CUDA GPU
is). The judge checks IPC works in both directions once per worker before the candidate is imported
(`ipc_check`); where it does not, the channel falls back to files in /dev/shm.
"""

from __future__ import annotations

import ctypes
import math
import time
from dataclasses import dataclass

import torch

ALIGN = 256
HANDLE_BYTES = 64
# This process's wall seconds in IPC work by kind (alloc: cuMemAlloc and its handle; open, close: mapping another
# process's handle; copy: copies into or out of shared allocations and their synchronise). A diagnosis only: a worker
# sends its own as `_ipc_s` with each reply, the judge records both in a verdict's stage seconds (`ipc_<role>_<kind>`).
SECONDS: dict[str, float] = {}


def _spent(kind: str, began: float) -> None:
    SECONDS[kind] = SECONDS.get(kind, 0.0) + time.perf_counter() - began


class IpcError(RuntimeError):
    """A CUDA IPC call failed or a handle/range was unusable."""


class _Handle(ctypes.Structure):
    _fields_ = [("reserved", ctypes.c_ubyte * HANDLE_BYTES)]  # c_ubyte: a c_char field would stop at a NUL

    @classmethod
    def of(cls, raw: bytes) -> _Handle:
        if len(raw) != HANDLE_BYTES:
            raise IpcError(f"an IPC handle has {HANDLE_BYTES} bytes, got {len(raw)}")
        return cls.from_buffer_copy(raw)


_lib: list = []


def _driver() -> ctypes.CDLL:
    if _lib:
        return _lib[0]
    lib = ctypes.CDLL("libcuda.so.1")
    ptr, u64, size = ctypes.POINTER, ctypes.c_uint64, ctypes.c_size_t
    open_name = "cuIpcOpenMemHandle_v2" if hasattr(lib, "cuIpcOpenMemHandle_v2") else "cuIpcOpenMemHandle"
    lib.kz_open = getattr(lib, open_name)
    sigs = {
        "cuMemAlloc_v2": [ptr(u64), size],
        "cuMemFree_v2": [u64],
        "cuIpcGetMemHandle": [ptr(_Handle), u64],
        "kz_open": [ptr(u64), _Handle, ctypes.c_uint],
        "cuIpcCloseMemHandle": [u64],
        "cuMemGetAddressRange_v2": [ptr(u64), ptr(size), u64],
        "cuMemcpyDtoD_v2": [u64, u64, size],
        "cuCtxSynchronize": [],
        "cuCtxGetCurrent": [ptr(ctypes.c_void_p)],
        "cuGetErrorName": [ctypes.c_int, ptr(ctypes.c_char_p)],
    }
    for name, args in sigs.items():
        fn = getattr(lib, name)
        fn.argtypes, fn.restype = args, ctypes.c_int
    _lib.append(lib)
    return lib


CUDA_ERROR_OUT_OF_MEMORY = 2


class IpcOutOfMemory(IpcError):
    """A driver allocation found no GPU memory: the machine's state, not a broken channel; the judge treats it as
    it treats torch's OutOfMemoryError (verified again alone, judge/faults.py), a worker reports `oom`."""


def _check(rc: int, what: str) -> None:
    if rc == CUDA_ERROR_OUT_OF_MEMORY:
        raise IpcOutOfMemory(f"{what}: CUDA_ERROR_OUT_OF_MEMORY (out of memory)")
    if rc != 0:
        name = ctypes.c_char_p()
        _driver().cuGetErrorName(rc, ctypes.byref(name))
        raise IpcError(f"{what}: {(name.value or b'').decode() or rc}")


def _ensure_context() -> None:
    """Make torch's CUDA context current on this thread (driver calls need one)."""
    torch.cuda.synchronize()
    ctx = ctypes.c_void_p()
    _check(_driver().cuCtxGetCurrent(ctypes.byref(ctx)), "cuCtxGetCurrent")
    if not ctx.value:
        raise IpcError("no current CUDA context")


class _Raw:
    """A device pointer as a `__cuda_array_interface__` object, so torch can view it without copying."""

    def __init__(self, ptr: int, nbytes: int):
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "data": (ptr, False), "version": 2}


def view_bytes(ptr: int, nbytes: int) -> torch.Tensor:
    """A uint8 tensor over device memory at `ptr` (not owned: the memory must outlive it)."""
    return torch.as_tensor(_Raw(ptr, nbytes), device="cuda")


def _aligned(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


def _pack(alloc: _Allocation, tensors: list[torch.Tensor]) -> list[tuple[int, torch.Tensor]]:
    """Copy `tensors` one after the other (aligned) into `alloc`; (offset, the copy) for each."""
    out, offset, began = [], 0, time.perf_counter()
    for t in tensors:
        region = alloc.bytes[offset : offset + t.nbytes].view(t.dtype).view(t.shape)
        region.copy_(t.detach())
        out.append((offset, region))
        offset += _aligned(t.nbytes)
    torch.cuda.synchronize()
    _spent("copy", began)
    return out


def _need(tensors: list[torch.Tensor]) -> int:
    return sum(_aligned(t.nbytes) for t in tensors)


class _Allocation:
    """One dedicated device allocation and its IPC handle."""

    def __init__(self, nbytes: int):
        _ensure_context()
        began = time.perf_counter()
        lib, ptr = _driver(), ctypes.c_uint64()
        _check(lib.cuMemAlloc_v2(ctypes.byref(ptr), max(nbytes, ALIGN)), f"cuMemAlloc({nbytes})")
        self.ptr, self.size = ptr.value, max(nbytes, ALIGN)
        handle = _Handle()
        _check(lib.cuIpcGetMemHandle(ctypes.byref(handle), self.ptr), "cuIpcGetMemHandle")
        self.handle = bytes(bytearray(handle.reserved))
        self.bytes = view_bytes(self.ptr, self.size)
        _spent("alloc", began)

    def free(self) -> None:
        self.bytes = None
        _driver().cuMemFree_v2(self.ptr)


@dataclass(frozen=True)
class IpcTensor:
    """Judge -> worker: a tensor in one of the judge's arena allocations."""

    handle: bytes
    offset: int
    dtype: str
    shape: tuple[int, ...]


@dataclass(frozen=True)
class IpcRef:
    """Worker -> judge: where the worker says one of its output tensors is (validated before use)."""

    handle: bytes
    offset: int
    nbytes: int
    dtype: torch.dtype
    shape: tuple[int, ...]


class Arena:
    """Judge side: copies of outgoing GPU tensors in allocations lent to one worker."""

    def __init__(self):
        self.allocations: list[_Allocation] = []

    def lend(self, tensors: list[torch.Tensor]) -> list[tuple[IpcTensor, torch.Tensor]]:
        """Copy `tensors` into one allocation; (what to send, the judge's view of the copy) for each.

        An earlier allocation big enough is reused (the worker answered the previous message, so its
        contents are no longer needed); else a new one is made. None is freed before `free()`.
        """
        fits = [a for a in self.allocations if a.size >= _need(tensors)]
        alloc = fits[0] if fits else _Allocation(_need(tensors))
        if not fits:
            self.allocations.append(alloc)
        return [
            (IpcTensor(alloc.handle, offset, str(t.dtype).removeprefix("torch."), tuple(t.shape)), view)
            for t, (offset, view) in zip(tensors, _pack(alloc, tensors))
        ]

    def free(self) -> None:
        """Only once the worker that mapped these allocations has exited."""
        for alloc in self.allocations:
            alloc.free()
        self.allocations = []


class Exporter:
    """Worker side: outputs copied into one allocation the judge may map. When a reply needs more, a new one at least
    twice as large takes over and the old one stays allocated until the process exits: the judge keeps its mappings
    open across replies (`fetch` with a cache), and freeing memory another process still maps is undefined."""

    def __init__(self):
        self.alloc: _Allocation | None = None
        self.spent: list[_Allocation] = []

    @property
    def size(self) -> int:  # every byte this exporter holds (a diagnosis of GPU memory: channel._gpu_peak)
        return sum(a.size for a in [self.alloc, *self.spent] if a is not None)

    def export(self, tensors: list[torch.Tensor]) -> list[dict]:
        if self.alloc is None or self.alloc.size < _need(tensors):
            if self.alloc is not None:
                self.spent.append(self.alloc)
            self.alloc = _Allocation(max(_need(tensors), 2 * (self.alloc.size if self.alloc else 0)))
        return [{"ipc": self.alloc.handle.hex(), "offset": offset} for offset, _ in _pack(self.alloc, tensors)]


_opened: dict[bytes, int] = {}  # worker side: handles of the judge's arena, open until the process exits


def open_lent(t: IpcTensor) -> torch.Tensor:
    """Worker side: the judge's tensor, viewed in place (the judge compares it after the call)."""
    if t.handle not in _opened:
        _ensure_context()
        ptr, began = ctypes.c_uint64(), time.perf_counter()
        _check(_driver().kz_open(ctypes.byref(ptr), _Handle.of(t.handle), 1), "cuIpcOpenMemHandle")
        _opened[t.handle] = ptr.value
        _spent("open", began)
    dtype = getattr(torch, t.dtype)
    numel = math.prod(t.shape)
    raw = (
        view_bytes(_opened[t.handle] + t.offset, numel * dtype.itemsize)
        if numel
        else torch.empty(0, dtype=torch.uint8, device="cuda")
    )
    return raw.view(dtype).view(t.shape)


MAX_MAPPED = 8  # handles a judge keeps open per worker; past that it closes them all and opens anew


def fetch(refs: list[IpcRef], mapped: dict[bytes, tuple[int, int]] | None = None) -> list[torch.Tensor]:
    """Judge side: the worker's tensors as the judge's own copies, each announced range checked against its mapped
    allocation. `mapped` (handle -> (pointer, bytes from it)), kept by the caller for one worker: handles stay open
    across replies and are closed by `close_mapped` once the worker is gone (opening and closing a handle are driver
    calls that queue behind every other process's on the GPU: inside a timing block, under the H200 gate's load, they
    cost more than the block's kernels). Without it, each handle is opened, used and closed here."""
    _ensure_context()
    lib = _driver()
    out: list[torch.Tensor] = []
    own_map = mapped is None
    mapped = {} if mapped is None else mapped
    if len(mapped) > MAX_MAPPED:  # a worker that sends a new handle every reply: keep the number of mappings bounded
        close_mapped(mapped)
    try:
        for ref in refs:
            if ref.handle not in mapped:
                mapped[ref.handle] = _open_checked(lib, ref.handle)
            ptr, size, began = *mapped[ref.handle], time.perf_counter()
            if ref.offset < 0 or ref.offset + ref.nbytes > size:
                raise IpcError(
                    f"tensor at offset {ref.offset} of {ref.nbytes} bytes lies outside the {size}-byte allocation"
                )
            own = torch.empty(ref.nbytes, dtype=torch.uint8, device="cuda")
            if ref.nbytes:
                _check(
                    lib.cuMemcpyDtoD_v2(own.data_ptr(), ptr + ref.offset, ref.nbytes), "copying the candidate's output"
                )
            out.append(
                own.view(ref.dtype).view(ref.shape)
                if ref.nbytes
                else torch.empty(ref.shape, dtype=ref.dtype, device="cuda")
            )
            _spent("copy", began)
        began = time.perf_counter()
        _check(lib.cuCtxSynchronize(), "cuCtxSynchronize")
        _spent("copy", began)
    except BaseException:
        close_mapped(mapped)  # a bad handle or range: nothing of this worker's stays mapped
        raise
    if own_map:
        close_mapped(mapped)
    return out


def _open_checked(lib: ctypes.CDLL, handle: bytes) -> tuple[int, int]:
    """(pointer, bytes from it to the allocation's end) of a worker's handle, mapped into this process."""
    ptr, base, size, began = ctypes.c_uint64(), ctypes.c_uint64(), ctypes.c_size_t(), time.perf_counter()
    _check(lib.kz_open(ctypes.byref(ptr), _Handle.of(handle), 1), "opening the candidate's memory handle")
    try:
        _check(lib.cuMemGetAddressRange_v2(ctypes.byref(base), ctypes.byref(size), ptr.value), "cuMemGetAddressRange")
    except IpcError:
        lib.cuIpcCloseMemHandle(ptr.value)
        raise
    _spent("open", began)
    return ptr.value, size.value - (ptr.value - base.value)


def close_mapped(mapped: dict[bytes, tuple[int, int]]) -> None:
    """Close every handle in `mapped` (a worker's, kept by `fetch`) and forget them."""
    if not mapped:
        return
    began, lib = time.perf_counter(), _driver()
    for ptr, _ in mapped.values():
        lib.cuIpcCloseMemHandle(ptr)
    mapped.clear()
    _spent("close", began)
