"""Keep the worker's own state out of the candidate's reach, by the plain Python routes.

The worker's report (launch counts, PyTorch ops, the tamper snapshot) is a first filter only: the judge decides
correctness from the outputs and speed from its own clock. Still, a candidate should not be able to rewrite that
report with plain Python. Before the candidate is imported, `seal()`:

- **imports**: takes every `kernelzero` module out of `sys.modules`, so `import kernelzero...` in the candidate gives
  a fresh copy from disk, and rebinding a function there (the reply function, the channel's writer) changes nothing
  in the running worker, which holds its own module objects (the judge's pickles still resolve to the worker's own
  classes: `channel.pin_classes`);
- **`__main__`**: replaces it with an empty module (the entry module held the worker's `main`);
- **`gc`**: removes `gc.get_objects`, `get_referrers` and `get_referents`, the walks from any object to all others;
- **threads' frames**: removes `sys._current_frames` (the frames of the worker's main thread).

`CleanRunner` then runs every piece of candidate code (its import, `ModelNew(...)`, each forward) on a thread of
its own whose stack holds nothing of the worker: a function with empty globals that takes a callable from a queue
and puts its result back. Frames walked from inside the candidate (`sys._getframe`, a traceback's `tb_frame`,
`f_back`) end at that thread's start.

Not covered: the kernel-launch wrappers the backends install keep the worker's guards in closure cells, reachable
through `__closure__` / `cell_contents` (the static checks refuse those names and computed attribute names), and
native code can reach anything in the process.
"""

from __future__ import annotations

import gc
import queue
import sys
import threading
import types
from collections.abc import Callable
from typing import Any


def seal() -> None:
    """Take kernelzero's modules, `__main__`, gc's object walks and other threads' frames out of reach."""
    for name in [m for m in sys.modules if m == "kernelzero" or m.startswith("kernelzero.")]:
        del sys.modules[name]
    sys.modules["__main__"] = types.ModuleType("__main__")
    for name in ("get_objects", "get_referrers", "get_referents"):
        if hasattr(gc, name):
            delattr(gc, name)
    if hasattr(sys, "_current_frames"):
        del sys._current_frames


_LOOP_SOURCE = """
def loop(jobs, results):
    while True:
        job = jobs.get()
        if job is None:
            return
        fn, args, modes = job
        try:
            for mode in modes:
                mode.__enter__()
            try:
                value = fn(*args)
            finally:
                for mode in reversed(modes):
                    mode.__exit__(None, None, None)
            results.put((True, value))
        except BaseException as exc:
            results.put((False, exc))
"""


_TIMED_SOURCE = """
def timed(model, args, start, end, sync, clock, host):
    sync()
    t0 = clock()
    start.record()
    value = model(*args)
    end.record()
    sync()
    host.append(clock() - t0)
    return value
"""


def _clean(source: str, name: str, builtins: dict[str, Any]) -> Callable:
    """Function `name` of `source`, compiled with empty globals (its `__globals__` reaches nothing)."""
    namespace: dict[str, Any] = {"__builtins__": builtins}
    exec(compile(source, "<kernelzero-runner>", "exec"), namespace)
    function = namespace[name]
    namespace.clear()
    return function


def _clean_loop() -> Callable:
    """The runner thread's function."""
    return _clean(
        _LOOP_SOURCE, "loop", {"BaseException": BaseException, "True": True, "False": False, "reversed": reversed}
    )


_BATCH_SOURCE = """
def batch(model, calls, starts, ends, stream, hold, clock, spent, marks, count, snaps, plain, copy, depths):
    values = []
    for k in range(len(calls)):
        args, modes = calls[k]
        hold.wait()
        t0 = clock()
        for mode in modes:
            mode.__enter__()
        try:
            starts[k].record(stream)
            values.append(model(*args))
            ends[k].record(stream)
        finally:
            for mode in reversed(modes):
                mode.__exit__(None, None, None)
        spent.append(clock() - t0)
        hold.settle(ends[k])
        marks.append(count())
        value = values[k]
        outs = value if type(value) is tuple or type(value) is list else (value,)
        modes_left = depths[0]() or depths[1]()
        copies = [copy(t) if type(t) is plain and not modes_left else None for t in outs]
        snaps.append(copies)
        hold.arm()
        whole = True
        for c in copies:
            if c is None:
                whole = False
        if whole:
            values[k] = None  # copied: the raw output's memory goes back (stream order keeps the copy's read first)
    return values
"""

# A whole block of calls (warm-ups, timed calls, audits) in one hand-off to the runner thread, each behind the GPU
# hold (worker/hold.py): `hold.wait()` returns once the hold has every SM, the start event, the forward's launches and
# the end event are queued behind it, `hold.settle(end)` releases it and waits for the call (and the device), and
# `hold.arm()` queues the next one. Audit calls enter their modes (the op recorder) around their forward alone; nothing
# else differs between an audit and a timed call. Between `settle` and `arm` (the call's work done, no hold running)
# a copy of each of its outputs goes to `snaps` (`copy`, only of a plain tensor and while no torch mode is left
# active, else None): it runs before the next hold, outside every timed interval, and holds what the call's outputs
# held when the call was done. (Taken after `arm`, the copies' allocations waited for the device while the armed hold
# waited for the host: on the H200, 2026-12-04, most timed verdicts of the gate had calls stalled to the hold's cap.)
# The judge checks the copies: an output a call left for a later call to fill (work deferred and batched across the
# block's calls) is wrong there, though right by the end of the block. A call whose outputs were all copied keeps
# None in `values` (its raw outputs are not held); the others keep what the forward returned, for the reply's words.
TIMED_BATCH = _clean(
    _BATCH_SOURCE,
    "batch",
    {"range": range, "len": len, "reversed": reversed, "BaseException": BaseException, "type": type, "tuple": tuple,
     "list": list},
)  # fmt: skip

# A floor batch's capture (worker/floor.py): the forward once per placeholder set, inside `capture` (the
# `torch.cuda.graph` context the worker made), on the runner thread; the raw outputs appended to `raw` and, right
# after each call in stream order, a copy of each of its outputs to `snaps` (`copy`: torch.Tensor.clone, made only of
# a plain tensor and only while no torch function or dispatch mode is active, `depths` their stacks' lengths). The
# judge checks the copies: an output its call left for a later call to fill (work batched across the calls of the
# graph) or to another stream to finish (calls overlapped) is wrong in its copy, though right in `raw` at the end.
CAPTURE_BATCH = _clean(
    """
def capture(model, sets, capture, raw, snaps, plain, copy, depths):
    with capture:
        for args in sets:
            value = model(*args)
            raw.append(value)
            if depths[0]() or depths[1]():
                raise RuntimeError("the forward left a torch function or dispatch mode active")
            outs = value if type(value) is tuple or type(value) is list else (value,)
            snaps.append([copy(t) if type(t) is plain else None for t in outs])
""",
    "capture",
    {"type": type, "tuple": tuple, "list": list, "RuntimeError": RuntimeError},
)

# One timed call, run on the runner thread itself (worker/timing.py): the events and the host clock bracket the
# candidate's forward there, so the hand-off between threads, the modes' entry and the worker's bookkeeping stay
# outside the measured interval, which holds the forward's own Python, its launches and its kernels.
TIMED_CALL = _clean(_TIMED_SOURCE, "timed", {})


class CleanRunner:
    """Runs candidate code on a thread whose stack holds nothing of the worker.

    `run(fn, *args, modes=())` returns `fn(*args)` (or raises what it raised), with the context managers `modes`
    entered on that thread (grad mode and dispatch modes are per thread). `fn` and `args` must not reach the
    worker either: pass the candidate's own objects, not closures over the worker.
    """

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._results: queue.SimpleQueue = queue.SimpleQueue()
        thread = threading.Thread(target=_clean_loop(), args=(self._jobs, self._results), daemon=True)
        thread.start()

    def run(self, fn: Callable, *args: Any, modes: tuple = ()) -> Any:
        self._jobs.put((fn, args, modes))
        ok, value = self._results.get()
        if not ok:
            raise value
        return value
