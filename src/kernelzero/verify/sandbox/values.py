"""Values sent by the reference's process: nested lists, tuples and string-keyed dicts of tensors and JSON scalars,
as a JSON structure plus the tensors (`pack_values`), rebuilt by the judge from JSON and raw bytes only
(`unpack_values`), never by unpickling (channel.py carries them: `send_msg` and the judge's reader).
"""

from __future__ import annotations

from typing import Any

from kernelzero.verify.sandbox.channel import ChannelError


def pack_values(values: Any) -> tuple[Any, list]:
    """(JSON structure, tensors) for nested lists/tuples/dicts of tensors and JSON scalars, to send with `send_msg`.

    A tensor becomes `{"_t": index}`; a tuple `{"_tuple": [...]}`. Anything else raises TypeError: the receiver
    rebuilds values from JSON and raw tensor bytes only (`unpack_values`), never by unpickling.
    """
    tensors: list = []
    return _pack_walk(values, tensors), tensors


def _pack_walk(value: Any, tensors: list) -> Any:
    # A module-level function, not a recursive closure: a closure that calls itself is a reference cycle holding
    # `tensors`, so every drawn input set stayed on the GPU until Python's cyclic collector ran (a reference
    # process of a 512 MiB-input task held 22-27 GB on the H200, 2026-12-02; tests/verify/test_cuda_ipc.py).
    import torch

    if isinstance(value, torch.Tensor):
        tensors.append(value)
        return {"_t": len(tensors) - 1}
    if isinstance(value, tuple):
        return {"_tuple": [_pack_walk(v, tensors) for v in value]}
    if isinstance(value, list):
        return [_pack_walk(v, tensors) for v in value]
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {"_dict": {k: _pack_walk(v, tensors) for k, v in value.items()}}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise TypeError(f"cannot send a {type(value).__name__} (tensors, numbers, strings and containers only)")


def unpack_values(structure: Any, tensors: list) -> Any:
    """The values `pack_values` packed, from its JSON structure and the received tensors."""
    if isinstance(structure, list):
        return [unpack_values(v, tensors) for v in structure]
    if isinstance(structure, dict):
        if set(structure) == {"_t"} and isinstance(structure["_t"], int) and 0 <= structure["_t"] < len(tensors):
            return tensors[structure["_t"]]
        if set(structure) == {"_tuple"} and isinstance(structure["_tuple"], list):
            return tuple(unpack_values(v, tensors) for v in structure["_tuple"])
        if set(structure) == {"_dict"} and isinstance(structure["_dict"], dict):
            return {str(k): unpack_values(v, tensors) for k, v in structure["_dict"].items()}
        raise ChannelError(f"malformed packed value {str(structure)[:80]}")
    if structure is None or isinstance(structure, (bool, int, float, str)):
        return structure
    raise ChannelError(f"malformed packed value of type {type(structure).__name__}")
