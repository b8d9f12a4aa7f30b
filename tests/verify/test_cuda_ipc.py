"""CUDA IPC between judge and worker (verify/sandbox/cuda_ipc.py, channel.py).

CPU: the judge parses a worker's GPU tensor specs strictly and opens nothing while parsing.
GPU (marker `gpu`): a real second process opens what the judge lends and lends its outputs back; the
judge rejects ranges outside the allocation and handles that open nothing; a lent allocation maps
only the lent tensors; a whole verification runs through IPC and agrees with one through host memory.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from dataclasses import asdict
from pathlib import Path

import pytest
import torch

from kernelzero.types import Task, to_dict
from kernelzero.verify.backends import get_backend
from kernelzero.verify.options import VerifyOptions
from kernelzero.verify.sandbox.channel import ChannelError, _write_frame, recv_msg

SRC = str(Path(__file__).resolve().parents[2] / "src")


def _recv(payload: bytes):
    r, w = os.pipe()
    t = threading.Thread(target=lambda: (_write_frame(w, payload), os.close(w)))
    t.start()
    try:
        return recv_msg(r)
    finally:
        t.join(10)
        os.close(r)


def test_gpu_tensor_spec_is_parsed_not_opened():
    from kernelzero.verify.sandbox.cuda_ipc import IpcRef

    spec = {"_tensors": [["float32", [2, 2], {"ipc": "ab" * 64, "offset": 512}]], "ok": True}
    header, tensors = _recv(json.dumps(spec).encode())
    assert header == {"ok": True}
    assert tensors == [IpcRef(bytes.fromhex("ab" * 64), 512, 16, torch.float32, (2, 2))]


@pytest.mark.parametrize(
    "where",
    [
        {"ipc": "ab" * 63, "offset": 0},  # a handle is 64 bytes
        {"ipc": "zz" * 64, "offset": 0},  # not hex
        {"ipc": "ab" * 64, "offset": -256},
        {"ipc": "ab" * 64, "offset": "0"},
        {"ipc": "ab" * 64, "offset": 0, "ptr": 1234},  # nothing beyond handle and offset
        {"offset": 0},
    ],
)
def test_malformed_gpu_tensor_specs_are_rejected(where):
    with pytest.raises(ChannelError, match="malformed GPU tensor spec"):
        _recv(json.dumps({"_tensors": [["float32", [4], where]]}).encode())


# -- GPU -------------------------------------------------------------------------------------------
CHILD = r"""
import json, sys, ctypes
import torch
from kernelzero.verify.sandbox import cuda_ipc
lent = cuda_ipc.IpcTensor(bytes.fromhex(sys.argv[1]), int(sys.argv[2]), "float32", (1024,))
x = cuda_ipc.open_lent(lent)
base, size = ctypes.c_uint64(), ctypes.c_size_t()
cuda_ipc._driver().cuMemGetAddressRange_v2(ctypes.byref(base), ctypes.byref(size), x.data_ptr())
out = x * 2
x.add_(1)  # the judge must see this in its own view of the lent copy
specs = cuda_ipc.Exporter().export([out])
torch.cuda.synchronize()
print(json.dumps({"specs": specs, "mapped": size.value}), flush=True)
sys.stdin.readline()  # keep the exported memory alive until the judge has fetched it
"""


def _child(handle: bytes, offset: int):
    env = {**os.environ, "PYTHONPATH": SRC}
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, handle.hex(), str(offset)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env,
        text=True,
    )
    return proc, json.loads(proc.stdout.readline())


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_lent_inputs_and_exported_outputs_cross_processes():
    from kernelzero.verify.sandbox.cuda_ipc import Arena, IpcError, IpcRef, close_mapped, fetch

    arena = Arena()
    pad = torch.zeros(100, device="cuda")  # a first tensor, so the probed one sits at an offset
    x = torch.arange(1024, dtype=torch.float32, device="cuda")
    (_, _), (sent, view) = arena.lend([pad, x])
    proc, got = _child(sent.handle, sent.offset)
    try:
        assert got["mapped"] == arena.allocations[0].size == 4608  # the allocation holds only what was lent
        spec = got["specs"][0]
        ref = IpcRef(bytes.fromhex(spec["ipc"]), spec["offset"], 4096, torch.float32, (1024,))
        (out,) = fetch([ref])
        assert torch.equal(out, x * 2)
        assert torch.equal(view, x + 1) and torch.equal(x, torch.arange(1024, dtype=torch.float32, device="cuda"))
        with pytest.raises(IpcError, match="outside"):
            fetch([IpcRef(ref.handle, 1 << 30, 4096, torch.float32, (1024,))])
        with pytest.raises(IpcError):
            fetch([IpcRef(b"\x01" * 64, 0, 4096, torch.float32, (1024,))])
        (again,) = fetch([ref])  # a failed fetch left nothing open that blocks the next
        assert torch.equal(again, x * 2)
        mapped: dict = {}  # a judge's cache for one worker: the handle stays open across replies, closed on demand
        assert torch.equal(fetch([ref], mapped)[0], x * 2) and list(mapped) == [ref.handle]
        assert torch.equal(fetch([ref], mapped)[0], x * 2) and list(mapped) == [ref.handle]
        with pytest.raises(IpcError, match="outside"):  # a bad range closes what the cache held
            fetch([IpcRef(ref.handle, 1 << 30, 4096, torch.float32, (1024,))], mapped)
        assert mapped == {}
        fetch([ref], mapped)
        close_mapped(mapped)
        assert mapped == {} and torch.equal(fetch([ref])[0], x * 2)
    finally:
        proc.communicate("\n", timeout=30)
        arena.free()


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_verification_through_ipc_agrees_with_host_memory():
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import fixtures as fx

    from kernelzero.verify import verify

    f = next(f for f in fx.load_fixtures() if f.name == "correct/triton_leaky_relu")
    results = {}
    for ipc in (True, False):
        verdict = verify(f.task(), f.source, f.backend, f.verify_options(device="cuda", cuda_ipc=ipc, time_it=False))
        results[ipc] = verdict
        assert verdict.status == "correct", (verdict.message, verdict.error_log)
    assert "ipc_check" in results[True].stage_seconds and not any("host memory" in n for n in results[True].notes), (
        results[True].notes
    )
    assert "ipc_check" not in results[False].stage_seconds
    print({ipc: v.stage_seconds for ipc, v in results.items()})


def test_a_driver_allocation_without_memory_is_out_of_memory_not_a_broken_channel(monkeypatch):
    """cuMemAlloc's CUDA_ERROR_OUT_OF_MEMORY (an arena the judge lends, an export) is the machine's state: a worker
    reports `oom`, the judge answers `retry_alone` (verified again alone), never a judge error (infra_error at once:
    the H200 gate of 2026-12-02 lost two fixtures that way)."""
    from kernelzero.verify.judge import judge as judge_module
    from kernelzero.verify.sandbox.cuda_ipc import IpcError, IpcOutOfMemory, _check
    from kernelzero.verify.worker.worker import classify

    with pytest.raises(IpcOutOfMemory) as caught:
        _check(2, "cuMemAlloc(2147483648)")
    assert isinstance(caught.value, IpcError) and classify(caught.value) == "oom"

    def out_of_memory(*args, **kwargs):
        raise IpcOutOfMemory("cuMemAlloc(2147483648): CUDA_ERROR_OUT_OF_MEMORY (out of memory)")

    monkeypatch.setattr(judge_module.Judge, "run", out_of_memory)
    request = {
        "task": to_dict(Task(name="t", source="x = 1\n")),
        "source": "y = 2\n",
        "backend": to_dict(get_backend("triton")),
        "options": asdict(VerifyOptions()),
    }
    answer = judge_module.judge_request(request)
    assert "CUDA_ERROR_OUT_OF_MEMORY" in answer["retry_alone"] and "error" not in answer


def test_a_replys_diagnosis_is_kept_only_as_numbers_under_known_names():
    """A reply's `_ipc_s`, `_cpu_s`, `_gpu_now` and `_gpu_peak` are the candidate's own words: the judge pops them
    from the header, keeps numbers under the kinds it knows, and drops the rest (they decide nothing)."""
    from types import SimpleNamespace

    from kernelzero.verify.sandbox.worker_process import WorkerProcess

    w = SimpleNamespace(gpu_trace=[], cpu_s=0.0, cpu_by_cmd={}, ipc_s={}, gpu_peaks={}, last_cmd="time")
    header = {"ok": True, "_ipc_s": {"open": 0.5, "copy": "x", "evil": 3}, "_cpu_s": 1.5, "_gpu_now": [1, 2, 3]}
    WorkerProcess._note(w, header | {"_gpu_peak": 7})
    WorkerProcess._note(w, header)
    assert w.ipc_s == {"open": 0.5} and w.cpu_by_cmd == {"time": 1.5} and w.gpu_peaks == {"time": 7}
    assert w.gpu_trace == [("time", 1, 2, 3)] * 2
    assert header == {"ok": True}  # popped from the header the judge reads
    WorkerProcess._note(w, {"_ipc_s": "nonsense", "_cpu_s": "1e9", "_gpu_now": [1, "2", 3], "_gpu_peak": 1.5})
    assert w.ipc_s == {"open": 0.5} and w.cpu_s == 1.5 and len(w.gpu_trace) == 2 and w.gpu_peaks == {"time": 7}
