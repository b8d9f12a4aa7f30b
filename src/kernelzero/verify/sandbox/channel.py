"""Messages between the trusted judge and the untrusted candidate worker.

Two directions, two formats:
- judge -> worker: pickled Python objects (`send_obj` / `recv_obj`, via `torch.save`). Only the
  worker unpickles, and what it unpickles comes from the trusted judge.
- worker -> judge: a JSON header plus raw tensor bytes (`send_msg` / `recv_msg`). The judge never
  unpickles anything the candidate's process wrote: the header is JSON, tensors are rebuilt from
  bytes with a dtype from a fixed list and a size the judge checks against a limit.

Frames are an 8-byte little-endian length followed by the payload.

Large tensors (at least `FILE_MIN_BYTES`) skip the pipe: they go through files in a per-worker transfer
folder in /dev/shm (memory), which moves hundreds of MB several times faster than a pipe. Judge ->
worker: the judge writes `in/N.bin` and pickles a `FileTensor` naming it (the worker maps the file
privately); worker -> judge: the worker writes `out/N.bin` and names it in the JSON header; the judge
accepts only names `N.bin` in the folder it made, opens them without following links, checks they are
regular files of exactly the announced size, copies the bytes and deletes the file. So the judge still
only ever reads raw bytes of a known dtype and size from the candidate's side. Reply headers carry a tag once
the judge has sent a key (`channel_auth.py`: the report cannot be rewritten in transit).

GPU tensors skip the host altogether once the judge has enabled CUDA IPC for a worker (cuda_ipc.py):
the judge sends `IpcTensor`s (copies in its arena, opened by the worker when it prepares the inputs) and
the worker names outputs as `{"ipc": handle, "offset": n}` (parsed into `IpcRef`s, which the judge's
main thread fetches and checks). Without IPC, GPU tensors are moved to the host and sent as above.
"""

from __future__ import annotations

import functools
import io
import json
import math
import os
import pickle
import re
import stat
import struct
import sys
import types
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

DTYPE_NAMES = (
    "float64",
    "float32",
    "float16",
    "bfloat16",
    "int64",
    "int32",
    "int16",
    "int8",
    "uint8",
    "bool",
    "complex64",
    "complex128",
)
MAX_FRAME = 1 << 36  # 64 GiB: a sanity bound, not a memory limit
IPC_KINDS = ("alloc", "open", "close", "copy")  # cuda_ipc.SECONDS's keys, the only ones a reply's `_ipc_s` may carry
FILE_MIN_BYTES = 1 << 20  # tensors at least this large go through the transfer folder when there is one
_FILE_NAME = re.compile(r"\d{1,9}\.bin")
_out: dict[str, Any] = {"dir": None, "seq": 0, "ipc": False, "exporter": None}  # the worker's side of send_msg


@dataclass(frozen=True)
class FileTensor:
    """Judge -> worker: a tensor whose bytes are in a file of the transfer folder."""

    path: str
    dtype: str
    shape: tuple[int, ...]


class FileSink:
    """Judge side: writes large tensors of outgoing objects to `folder`; removes the previous message's files."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self.seq = 0
        self.written: list[Path] = []
        self.arena = None  # a cuda_ipc.Arena once the judge has enabled IPC for this worker
        self.lent: list = []  # the judge's views of the GPU tensors of the last message, in order

    def clear(self) -> None:
        for path in self.written:
            path.unlink(missing_ok=True)
        self.written = []
        self.lent = []

    def prepare(self, obj: Any) -> Any:
        """The object to pickle: GPU tensors lent through the arena (or moved to the host), large ones in files."""
        gpu: list = []
        _walk(obj, lambda x: gpu.append(x) if _on_gpu(x) else x)
        if gpu and self.arena is not None:
            lent = self.arena.lend(gpu)
            self.lent = [view for _, view in lent]
            handles = {id(t): sent for t, (sent, _) in zip(gpu, lent)}
            obj = _walk(obj, lambda x: handles[id(x)] if _on_gpu(x) else x)
        elif gpu:
            obj = _walk(obj, lambda x: x.cpu() if _on_gpu(x) else x)
        return _walk(obj, self._to_file)

    def _to_file(self, obj: Any) -> Any:
        import torch

        if (
            isinstance(obj, torch.Tensor)
            and obj.device.type == "cpu"
            and obj.nbytes >= FILE_MIN_BYTES
            and str(obj.dtype).removeprefix("torch.") in DTYPE_NAMES
        ):
            self.seq += 1
            path = self.folder / f"{self.seq}.bin"
            flat = obj.detach().contiguous().reshape(-1).view(torch.uint8)
            flat.numpy().tofile(path)
            path.chmod(0o644)
            self.written.append(path)
            return FileTensor(str(path), str(obj.dtype).removeprefix("torch."), tuple(obj.shape))
        return obj


def _walk(obj: Any, leaf) -> Any:
    """`obj` with `leaf` applied to everything inside its dicts, lists and tuples (containers rebuilt)."""
    if isinstance(obj, dict):
        return {k: _walk(v, leaf) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_walk(v, leaf) for v in obj)
    return leaf(obj)


def _on_gpu(obj: Any) -> bool:
    import torch

    return isinstance(obj, torch.Tensor) and obj.device.type == "cuda"


def _from_file(obj: Any) -> Any:
    import torch

    if isinstance(obj, FileTensor):
        dtype = getattr(torch, obj.dtype)
        return torch.from_file(obj.path, shared=False, size=math.prod(obj.shape), dtype=dtype).reshape(obj.shape)
    return obj


def use_out_dir(folder: str | None) -> None:
    """Worker side: write large outgoing tensors to `folder` (None: everything through the pipe)."""
    _out["dir"] = folder


def use_ipc(enabled: bool) -> None:
    """Worker side: send GPU tensors as CUDA IPC handles (the judge asks per command)."""
    _out["ipc"] = enabled


class ChannelError(Exception):
    """The other side closed the channel or sent something malformed."""


def _write_frame(fd: int, payload: bytes | memoryview) -> None:
    os.write(fd, struct.pack("<Q", len(payload)))
    view = memoryview(payload)
    while view:
        n = os.write(fd, view[: 1 << 24])
        view = view[n:]


def _read_exact(fd: int, n: int) -> bytearray:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        chunk = os.readv(fd, [view[got:]])
        if chunk == 0:
            raise ChannelError("the other side closed the channel")
        got += chunk
    return buf


def _read_frame(fd: int) -> bytearray:
    (n,) = struct.unpack("<Q", _read_exact(fd, 8))
    if n > MAX_FRAME:
        raise ChannelError(f"frame of {n} bytes exceeds the limit")
    return _read_exact(fd, n)


def send_obj(fd: int, obj: Any, sink: FileSink | None = None) -> None:
    """Judge -> worker: a picklable object (tensors included; large ones through `sink`'s folder)."""
    import torch  # imported here so that starting a worker does not wait for torch

    if sink is not None:
        sink.clear()  # the worker answered the previous message: its files are no longer needed
        obj = sink.prepare(obj)
    buf = io.BytesIO()
    torch.save(obj, buf)
    _write_frame(fd, buf.getbuffer())


_PINNED: dict[tuple[str, str], type] = {}  # classes named in the judge's pickles, resolved to these objects


def pin_classes(*classes: type) -> None:
    """Worker side: resolve these classes by (module, name) to the objects given, even once their modules have left
    `sys.modules` (worker/seal.py): a fresh import would give other, equal-looking classes."""
    for cls in classes:
        _PINNED[(cls.__module__, cls.__qualname__)] = cls


class _PinnedUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        pinned = _PINNED.get((module, name))
        return pinned if pinned is not None else super().find_class(module, name)


_PINNED_PICKLE = types.SimpleNamespace(
    __name__="pickle", Unpickler=_PinnedUnpickler, load=lambda f, **kw: _PinnedUnpickler(f, **kw).load()
)


def recv_obj(fd: int) -> Any:
    """Worker side: the next object from the judge."""
    import torch

    data = io.BytesIO(_read_frame(fd))
    return _walk(torch.load(data, weights_only=False, pickle_module=_PINNED_PICKLE), _from_file)


def cpu_seconds() -> float:
    """This process's CPU seconds so far, its own and its reaped children's (user and system): sent as `_cpu_s`
    with every reply, a diagnosis of throughput (judge.Judge._cpu_seconds)."""
    return sum(os.times()[:4])


def _ipc_seconds() -> dict[str, dict[str, float]]:
    """This process's seconds in CUDA IPC work by kind (cuda_ipc.SECONDS), as `_ipc_s`, once it has done any: a
    diagnosis of the timing window's cost only (the candidate's process can write it)."""
    ipc = sys.modules.get("kernelzero.verify.sandbox.cuda_ipc")
    spent = getattr(ipc, "SECONDS", None)
    return {"_ipc_s": {k: round(v, 4) for k, v in spent.items()}} if spent else {}


def _gpu_peak() -> dict[str, int]:
    """This process's GPU memory high-water mark (PyTorch's reserved peak plus the IPC export allocation), as
    `_gpu_peak` in every reply once CUDA is initialised: the judge records it per command, a diagnosis of the memory
    lease's estimate only (the candidate's process can write it, so nothing is decided from it)."""
    import torch

    if not torch.cuda.is_initialized():
        return {}
    extra = int(getattr(_out.get("exporter"), "size", 0) or 0)
    return {
        "_gpu_peak": int(torch.cuda.max_memory_reserved()) + extra,
        "_gpu_now": [int(torch.cuda.memory_allocated()), int(torch.cuda.memory_reserved()), extra],
    }


def send_msg(fd: Any, header: dict[str, Any], tensors: list[torch.Tensor] = ()) -> None:
    """Worker -> judge: a JSON header and tensors as raw bytes (to CPU, contiguous); `fd` a descriptor, or a
    `channel_auth.SignedWriter` once the judge's key has arrived (tagged headers)."""
    import torch

    lent = {}
    if _out["ipc"] and any(t.is_cuda for t in tensors):
        from kernelzero.verify.sandbox.cuda_ipc import Exporter

        _out["exporter"] = _out["exporter"] or Exporter()
        on_gpu = [i for i, t in enumerate(tensors) if t.is_cuda]
        lent = dict(zip(on_gpu, _out["exporter"].export([tensors[i] for i in on_gpu])))
    cpu = [t if i in lent else t.detach().to("cpu").contiguous() for i, t in enumerate(tensors)]
    specs = []
    for i, t in enumerate(cpu):
        spec = [str(t.dtype).removeprefix("torch."), list(t.shape)]
        if i in lent:
            spec.append(lent[i])
        elif _out["dir"] and t.numel() * t.element_size() >= FILE_MIN_BYTES:
            _out["seq"] += 1
            name = f"{_out['seq']}.bin"
            t.reshape(-1).view(torch.uint8).numpy().tofile(os.path.join(_out["dir"], name))
            spec.append(name)
        specs.append(spec)
    header = {**header, "_tensors": specs, **_gpu_peak(), "_cpu_s": round(cpu_seconds(), 3), **_ipc_seconds()}
    if isinstance(fd, int):
        _write_frame(fd, json.dumps(header).encode())
        raw = functools.partial(_write_frame, fd)
    else:  # a channel_auth.SignedWriter: a tagged header
        fd.header(header)
        raw = fd.raw
    for t, spec in zip(cpu, specs):
        if len(spec) == 2:
            raw(t.reshape(-1).view(torch.uint8).numpy() if t.numel() else b"")


def _read_file(folder: Path | None, name: Any, nbytes: int) -> torch.Tensor:
    """The bytes (uint8 tensor, the judge's own copy) of a tensor file the worker wrote: a plain `N.bin` in
    `folder`, exactly `nbytes` long."""
    import mmap

    import torch

    if folder is None or not isinstance(name, str) or not _FILE_NAME.fullmatch(name):
        raise ChannelError(f"unexpected tensor file {name!r}")
    path = Path(folder) / name
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        raise ChannelError(f"tensor file {name!r}: {exc.strerror}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size != nbytes:
            raise ChannelError(f"tensor file {name!r} is not a regular file of {nbytes} bytes")
        if nbytes == 0:
            return torch.empty(0, dtype=torch.uint8)
        mapped = mmap.mmap(fd, nbytes, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_WRITE)
        view = torch.frombuffer(mapped, dtype=torch.uint8)
        own = view.clone()  # one copy, into the judge's memory; the file can change afterwards for all we care
        del view
        mapped.close()
        return own
    finally:
        os.close(fd)
        path.unlink(missing_ok=True)


def recv_msg(
    fd: int, max_bytes: int = MAX_FRAME, file_dir: Path | None = None, auth: Any = None
) -> tuple[dict[str, Any], list[torch.Tensor]]:
    """Judge side: the next header and tensors; malformed input raises ChannelError, a header whose tag does not
    match (once `auth`, a `channel_auth.Authenticator`, is armed) ForgedReply.

    `file_dir`: the worker's transfer folder, where it may put large tensors (see the module docstring).
    """
    import torch

    payload = _read_frame(fd)
    try:
        header = json.loads(auth.open(payload) if auth is not None else payload)
        specs = header.pop("_tensors")
        assert isinstance(header, dict) and isinstance(specs, list)
    except (ValueError, KeyError, AssertionError, TypeError) as exc:
        raise ChannelError(f"malformed message from the candidate: {exc}") from None
    tensors = []
    for spec in specs:
        if not isinstance(spec, list) or len(spec) not in (2, 3):
            raise ChannelError(f"malformed tensor spec {spec!r}")
        dtype_name, shape = spec[0], spec[1]
        if (
            not isinstance(shape, list)
            or dtype_name not in DTYPE_NAMES
            or not all(isinstance(s, int) and s >= 0 for s in shape)
        ):
            raise ChannelError(f"malformed tensor spec {spec!r}")
        dtype = getattr(torch, dtype_name)
        numel = 1
        for s in shape:
            numel *= s
        nbytes = numel * dtype.itemsize
        if nbytes > max_bytes:
            raise ChannelError(f"tensor of {nbytes} bytes exceeds the limit")
        if len(spec) == 3 and isinstance(spec[2], dict):
            tensors.append(_ipc_ref(spec, dtype, tuple(shape), nbytes))
            continue
        if len(spec) == 3:
            t = _read_file(file_dir, spec[2], nbytes)
        else:
            raw = _read_frame(fd)
            if len(raw) != nbytes:
                raise ChannelError(f"tensor {spec!r} sent {len(raw)} bytes, expected {nbytes}")
            t = torch.frombuffer(raw, dtype=torch.uint8) if nbytes else torch.empty(0, dtype=torch.uint8)
        tensors.append(t.view(dtype).reshape(shape) if nbytes else torch.empty(shape, dtype=dtype))
    return header, tensors


def _ipc_ref(spec: list, dtype: torch.dtype, shape: tuple[int, ...], nbytes: int):
    """A checked `IpcRef` from a worker's spec `[dtype, shape, {"ipc": hex, "offset": n}]` (not opened here)."""
    from kernelzero.verify.sandbox.cuda_ipc import HANDLE_BYTES, IpcRef

    where = spec[2]
    try:
        handle = bytes.fromhex(where["ipc"])
        offset = where["offset"]
        assert set(where) == {"ipc", "offset"} and len(handle) == HANDLE_BYTES
        assert isinstance(offset, int) and 0 <= offset < MAX_FRAME
    except (KeyError, TypeError, ValueError, AssertionError):
        raise ChannelError(f"malformed GPU tensor spec {spec!r}") from None
    return IpcRef(handle, offset, nbytes, dtype, shape)
