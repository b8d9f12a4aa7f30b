"""Runtime checks inside the candidate's worker: which kernels ran, which PyTorch ops ran, tampering.

Installed by the worker before the candidate is imported. They observe the candidate from inside
its own process, so a candidate with native code could in principle switch them off; the judge's
comparison of outputs does not depend on them. What each reports, per forward call:

- own launches: what each backend's worker hook counts through `wrap_launch` / `wrap_builder` (Triton kernels,
  on a GPU or in the interpreter; calls into the candidate's own `load_inline` extensions);
- PyTorch ops: every ATen op the candidate's code dispatches while the forward runs (a TorchDispatchMode, on
  correctness and audit calls), minus allocation, copy, view and reshape ops (`ALLOWED_OPS`); ops are attributed
  by who called (`watch.from_user_code`): those of a kernel language's own runtime (Triton's launch machinery and
  interpreter, Helion) are not the candidate's, while those of code the candidate hands to it (a pre-run hook, a
  grid function, a kernel body the interpreter runs) are; device -> host copies and many scalar reads are host
  compute (`host:copy_to_host`, `host:item`);
- host compute and probes (worker/watch.py): numpy, ctypes and host copies from the candidate's code, and
  calls that inspect the harness's watch state or the clock, on every call (timed ones too: the wrappers are
  always there and cost nothing unless called);
- tampering: the identity of the functions the harness relies on (timers, events, synchronise,
  comparison and channel functions), checked after every call;
- output shape of the answer: plain `torch.Tensor`, no zero strides, storage not shared with an
  input or another output.
"""

from __future__ import annotations

import contextlib
import functools
import sys
import time
import types
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from kernelzero.verify.sandbox import channel
from kernelzero.verify.worker import hold, timed_block, timing, watch
from kernelzero.verify.worker.watch import HOST_COPY_MIN, ITEM_LIMIT, Watch, from_user_code

ALLOWED_OPS = frozenset(
    """
empty empty_like empty_strided new_empty new_empty_strided zeros zeros_like ones ones_like full full_like
new_zeros new_ones new_full fill_ zero_ copy_ clone _to_copy to contiguous view _unsafe_view reshape view_as
as_strided t transpose permute expand expand_as unsqueeze squeeze flatten unflatten select slice narrow split
split_with_sizes chunk unbind detach alias lift_fresh lift_fresh_copy _local_scalar_dense movedim resize_
_reshape_alias arange is_same_size set_ sym_size sym_stride sym_numel dim numel
""".split()
)


COPIES = frozenset({"_to_copy", "copy_", "to"})


def _to_host(name: str, args: tuple, kwargs: dict) -> bool:
    """Does this copy op move at least HOST_COPY_MIN elements from a device to the host?"""
    src = args[1] if name == "copy_" and len(args) > 1 else (args[0] if args else None)
    if not isinstance(src, torch.Tensor) or src.device.type == "cpu" or src.numel() < HOST_COPY_MIN:
        return False
    if name == "copy_":
        return isinstance(args[0], torch.Tensor) and args[0].device.type == "cpu"
    device = kwargs.get("device")
    return device is not None and torch.device(device).type == "cpu"


class OpRecorder(TorchDispatchMode):
    """Records the names of ATen ops the candidate's code dispatches while active (`watch.from_user_code`; paused
    only where a backend says, e.g. Helion's compiler)."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: set[str] = set()
        self.paused = 0
        self.scalar_reads = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if not self.paused:
            name = func.overloadpacket.__name__
            if name not in ALLOWED_OPS:
                if from_user_code(sys._getframe(1)):
                    self.ops.add(name)
            elif name in COPIES:
                if _to_host(name, args, kwargs) and from_user_code(sys._getframe(1)):
                    self.ops.add("host:copy_to_host")
            elif name == "_local_scalar_dense" and from_user_code(sys._getframe(1)):
                self.scalar_reads += 1
                if self.scalar_reads > ITEM_LIMIT:
                    self.ops.add("host:item")
        return func(*args, **kwargs)

    def compute_ops(self) -> list[str]:
        return sorted(op for op in self.ops if op not in ALLOWED_OPS)


def warm_dispatch() -> float:
    """Run one op under an op recorder: the first dispatch mode imports seconds of torch (torch._dynamo in
    torch 2.11-2.13), paid here rather than inside a sample's first call. Seconds taken."""
    start = time.perf_counter()
    with OpRecorder():
        torch.zeros(2).add_(1)
    return time.perf_counter() - start


class Guards:
    """Launch counting, op recording and tamper checks for one worker."""

    def __init__(self, warm: bool = True) -> None:
        self.launches: dict[str, int] = {}
        self.recorder: OpRecorder | None = None
        self.watch = Watch()
        watch.install(self.watch)
        self._snapshot = self._targets()
        if warm:
            warm_dispatch()  # before the candidate is imported and long before the GPU is held
        self.launches, self.last_ops = {}, []

    # -- launches --------------------------------------------------------------------------------
    def _count(self, name: str) -> None:
        self.launches[name] = self.launches.get(name, 0) + 1

    def wrap_launch(self, run, name_of, pause_recorder: bool = True):
        """`run` (a kernel launcher taking the kernel first) counting each launch as `name_of(kernel)`.

        `pause_recorder=False` (Triton): the op recorder stays on during the launch, and what the launcher's own code
        dispatches is told apart by who called (`watch.from_user_code`), so PyTorch work in code the candidate hands
        to the launch (pre-run hooks, a grid function, an interpreted kernel body) is recorded. The default pauses it
        for the whole launch: for a language whose kernels are themselves PyTorch code run on this machine (a test
        language), not for one whose launcher calls user callbacks."""
        guards = self

        @functools.wraps(run)
        def launch(kernel, *args, **kwargs):
            recorder = guards.recorder if pause_recorder else None
            if recorder is not None:
                recorder.paused += 1
            try:
                out = run(kernel, *args, **kwargs)
            finally:
                if recorder is not None:
                    recorder.paused -= 1
            if not kwargs.get("warmup", False):
                guards._count(name_of(kernel))
            return out

        return launch

    def snapshot(self) -> None:
        """Remember the harness's functions as they are now (after the backends' hooks are installed)."""
        self._snapshot = self._targets()

    def wrap_builder(self, build):
        """`build` (an extension builder) whose modules' callables count as the candidate's own launches."""
        guards = self

        @functools.wraps(build)
        def wrapped(*args, **kwargs):
            module = build(*args, **kwargs)
            proxy = types.SimpleNamespace()
            for name in dir(module):
                fn = getattr(module, name)
                if callable(fn) and not name.startswith("_"):
                    setattr(proxy, name, guards._counting(fn, f"{getattr(module, '__name__', 'ext')}.{name}"))
            return proxy

        return wrapped

    def _counting(self, fn, name: str):
        @functools.wraps(fn)
        def call(*args, **kwargs):
            self._count(name)
            return fn(*args, **kwargs)

        return call

    # -- per call --------------------------------------------------------------------------------
    @contextlib.contextmanager
    def observe(self, record_ops: bool):
        """Reset launch counts; yields the modes to enter where the candidate's code runs (the op recorder when
        asked: dispatch modes are per thread, and the candidate runs on a thread of its own, worker/seal.py)."""
        self.launches = {}
        self.last_ops: list[str] = []
        if not record_ops:
            yield ()
            return
        recorder = OpRecorder()
        self.recorder = recorder
        try:
            yield (recorder,)
        finally:
            self.recorder = None
            self.last_ops = recorder.compute_ops()

    # -- tampering -------------------------------------------------------------------------------
    @staticmethod
    def _targets() -> dict[str, Any]:
        targets = {
            "time.perf_counter": time.perf_counter,
            "time.monotonic": time.monotonic,
            "torch.allclose": torch.allclose,
            "torch.equal": torch.equal,
            "torch.isclose": torch.isclose,
            "torch.Tensor.cpu": torch.Tensor.cpu,
            "torch.Tensor.to": torch.Tensor.to,
            "torch.Tensor.contiguous": torch.Tensor.contiguous,
            "torch.Tensor.numpy": torch.Tensor.numpy,
            "torch.Tensor.reshape": torch.Tensor.reshape,
            "torch.Tensor.view": torch.Tensor.view,
            "torch.cuda.synchronize": torch.cuda.synchronize,
            "torch.cuda.Event": torch.cuda.Event,
            "torch.cuda.Event.record": torch.cuda.Event.record,
            "torch.cuda.Event.elapsed_time": torch.cuda.Event.elapsed_time,
            "channel.send_msg": channel.send_msg,
            "channel._write_frame": channel._write_frame,
            "timing.time_calls": timing.time_calls,
            "timing._clock": timing._clock,
            "timing._elapsed": timing._elapsed,
            "timing._sync": timing._sync,
            "timed_block._clock": timed_block._clock,
            "timed_block._elapsed": timed_block._elapsed,
            "timed_block.run_calls": timed_block.run_calls,
            "hold.Hold.wait": hold.Hold.wait,
            "hold.Hold.settle": hold.Hold.settle,
            "hold.Hold.arm": hold.Hold.arm,
            "hold.Hold.end": hold.Hold.end,
            "torch.no_grad": torch.no_grad,
            "sys.modules[torch]": sys.modules.get("torch"),
        }
        return targets

    def tampered(self) -> str:
        """'' when every guarded function is the one seen at start, else which one changed."""
        now = self._targets()
        changed = [name for name, obj in self._snapshot.items() if now.get(name) is not obj]
        return f"replaced: {', '.join(changed)}" if changed else ""


def output_problem(outputs: list[torch.Tensor], inputs: list[Any]) -> str:
    """'' when each output is a plain dense tensor owning its memory, else what is wrong."""
    spans = []
    for x in inputs:
        if isinstance(x, torch.Tensor) and x.numel():
            s = x.untyped_storage()
            spans.append(("an input", s.data_ptr(), s.data_ptr() + s.nbytes()))
    for k, out in enumerate(outputs):
        if type(out) is not torch.Tensor:
            return f"output {k} is a {type(out).__name__}, not a plain torch.Tensor"
        if out.numel() > 1 and any(st == 0 and sz > 1 for st, sz in zip(out.stride(), out.shape)):
            return f"output {k} has a zero stride (an expanded view, not materialised)"
        if not out.numel():
            continue
        s = out.untyped_storage()
        lo, hi = s.data_ptr(), s.data_ptr() + s.nbytes()
        for what, a, b in spans:
            if lo < b and a < hi:
                return f"output {k} shares memory with {what}"
        spans.append((f"output {k}", lo, hi))
    return ""
