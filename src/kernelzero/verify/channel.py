"""Messages between the trusted judge and the untrusted candidate worker.

Two directions, two formats:
- judge -> worker: pickled Python objects (`send_obj` / `recv_obj`, via `torch.save`). Only the
  worker unpickles, and what it unpickles comes from the trusted judge.
- worker -> judge: a JSON header plus raw tensor bytes (`send_msg` / `recv_msg`). The judge never
  unpickles anything the candidate's process wrote: the header is JSON, tensors are rebuilt from
  bytes with a dtype from a fixed list and a size the judge checks against a limit.

Frames are an 8-byte little-endian length followed by the payload.
"""

from __future__ import annotations

import io
import json
import os
import struct
from typing import Any

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

DTYPE_NAMES = ("float64", "float32", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool",
               "complex64", "complex128")  # fmt: skip
MAX_FRAME = 1 << 36  # 64 GiB: a sanity bound, not a memory limit


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


def send_obj(fd: int, obj: Any) -> None:
    """Judge -> worker: a picklable object (tensors included)."""
    import torch  # imported here so that starting a worker does not wait for torch

    buf = io.BytesIO()
    torch.save(obj, buf)
    _write_frame(fd, buf.getbuffer())


def recv_obj(fd: int) -> Any:
    """Worker side: the next object from the judge."""
    import torch

    return torch.load(io.BytesIO(_read_frame(fd)), weights_only=False)


def send_msg(fd: int, header: dict[str, Any], tensors: list[torch.Tensor] = ()) -> None:
    """Worker -> judge: a JSON header and tensors as raw bytes (moved to CPU, made contiguous)."""
    import torch

    cpu = [t.detach().to("cpu").contiguous() for t in tensors]
    header = {**header, "_tensors": [[str(t.dtype).removeprefix("torch."), list(t.shape)] for t in cpu]}
    _write_frame(fd, json.dumps(header).encode())
    for t in cpu:
        _write_frame(fd, t.reshape(-1).view(torch.uint8).numpy() if t.numel() else b"")


def recv_msg(fd: int, max_bytes: int = MAX_FRAME) -> tuple[dict[str, Any], list[torch.Tensor]]:
    """Judge side: the next header and tensors; malformed input raises ChannelError."""
    import torch

    try:
        header = json.loads(_read_frame(fd))
        specs = header.pop("_tensors")
        assert isinstance(header, dict) and isinstance(specs, list)
    except (ValueError, KeyError, AssertionError, TypeError) as exc:
        raise ChannelError(f"malformed message from the candidate: {exc}") from None
    tensors = []
    for spec in specs:
        dtype_name, shape = spec
        if dtype_name not in DTYPE_NAMES or not all(isinstance(s, int) and s >= 0 for s in shape):
            raise ChannelError(f"malformed tensor spec {spec!r}")
        dtype = getattr(torch, dtype_name)
        numel = 1
        for s in shape:
            numel *= s
        nbytes = numel * dtype.itemsize
        if nbytes > max_bytes:
            raise ChannelError(f"tensor of {nbytes} bytes exceeds the limit")
        raw = _read_frame(fd)
        if len(raw) != nbytes:
            raise ChannelError(f"tensor {spec!r} sent {len(raw)} bytes, expected {nbytes}")
        t = torch.frombuffer(raw, dtype=torch.uint8) if nbytes else torch.empty(0, dtype=torch.uint8)
        tensors.append(t.view(dtype).reshape(shape) if nbytes else torch.empty(shape, dtype=dtype))
    return header, tensors
