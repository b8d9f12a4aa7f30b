"""The floor batch (judge/floor.py): a timing block's calls captured in one CUDA graph, replayed inside the judge's
clock with no host launch path in it and no candidate Python running.

Staging (`stage`, the worker's `time_stage` with `floor`): zeroed placeholders shaped like the staged sets; the
forward captured once per placeholder set in the runner thread (`seal.CAPTURE_BATCH`, under no_grad; the candidate's
code runs there and only there), each call followed in the graph by a copy of its outputs; a synchronise (nothing of
the candidate's may still run: a kernel it left running would see the sets arrive); each graph replayed once untimed
(its first launch uploads it); then the staged sets are copied into the placeholders. What the forward computed while
it was captured saw zeros, so it is of no use to the replay. The copies are what the judge checks: each holds what
its call's outputs held when the call was done in stream order, so work deferred across the graph's calls (a call
that leaves its output to a later one, which then computes several at once) or overlapped between them (a call's work
left on a stream joined only at the end) is wrong there. Beside it, `blank`: a graph of the same copies alone
(outputs shaped alike, no candidate code), whose replay the judge takes off the batch's (the copies' cost with its
own round trip). Run (`run`): replay the batch or the blank, synchronise, reply with nothing but `ok` (the judge's
clock is the measure). Fetch: the copies of the batch's outputs.

Records: `stage` returns `(Floor, "")`, or `(None, why)` when the forward cannot be captured (a synchronise or host
read inside it, work on a stream the capture does not follow, an allocation the graph refuses): the judge then has no
floor for this verification and keeps its clock check (judge/timing_checks.py), and the verdict says why. A launch on
the legacy default stream (a `<<<...>>>` without a stream) is not captured: it runs at once on the zeroed
placeholders, and the replay's copies are wrong; the judge then takes no floor either (judge/floor.py).

Boundaries: the placeholders and the graph live in the candidate's process. After its capture no candidate Python is
called and none of its kernels runs but the graph's. Work done ahead is not caught: every set is in place before the
replay, so a call's kernel that finds later calls' placeholders (their addresses follow one another) could compute
their outputs at once; the floor is then lower than the calls' own time (it only ever raises a candidate's time).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from kernelzero.verify.worker.seal import CAPTURE_BATCH

if TYPE_CHECKING:
    from kernelzero.verify.worker.worker import Worker


# What the floor calls, taken when this module is imported, before the candidate's code is: a candidate that rebinds
# torch's functions while it is captured changes nothing the floor does afterwards in the judge's clock. The mode
# stacks' lengths are also taken before the worker's watch wraps them (worker/watch.py): the capture loop asks them as
# kernelzero, not as the candidate.
_DEPTHS = (torch._C._len_torch_function_stack, torch._C._len_torch_dispatch_stack)
_SYNC = torch.cuda.synchronize
_GRAPH = torch.cuda.CUDAGraph
_REPLAY = torch.cuda.CUDAGraph.replay
_CAPTURING = torch.cuda.graph
_SET_STREAM = torch.cuda.set_stream
_DEFAULT_STREAM = torch.cuda.default_stream
_ZEROS_LIKE = torch.zeros_like
_COPY = torch.Tensor.copy_
_CLONE = torch.Tensor.clone
_NO_GRAD = torch.no_grad
_TENSOR = torch.Tensor


@dataclass
class Floor:
    """A captured floor batch: the graph, its placeholders (inputs), the raw outputs of its calls, the copies of each
    call's outputs taken right after it (checked by the judge), and the blank graph of those copies alone."""

    graph: Any
    places: list
    raw: list
    snaps: list
    blank: Any = None
    kept: tuple = ()  # the blank graph's tensors, alive as long as it is


def stage(worker: Worker, sets: list[list]) -> tuple[Floor | None, str]:
    """Capture the forward on placeholders of `sets` (prepared already), then copy `sets` in (see the docstring)."""
    if not sets:
        return Floor(None, [], [], []), ""
    places = [[_ZEROS_LIKE(v) if isinstance(v, _TENSOR) else v for v in s] for s in sets]
    graph, raw, snaps = _GRAPH(), [], []
    try:
        _SYNC()
        worker.runner.run(
            CAPTURE_BATCH,
            worker.model,
            places,
            _CAPTURING(graph),
            raw,
            snaps,
            _TENSOR,
            _CLONE,
            _DEPTHS,
            modes=(_NO_GRAD(),),
        )
        # Nothing of the candidate's may run once it is captured: a kernel it left running would see the sets arrive
        # and compute with them outside the judge's clock. It must end here (one that waits is the candidate's
        # timeout: the judge stops waiting for this reply).
        _SYNC()
    except BaseException as exc:  # noqa: BLE001 - any capture failure: no floor, and why
        return None, _failed(worker, exc)
    # only `type` is asked of what the forward returned (an isinstance could run the candidate's code here)
    if len(snaps) != len(places) or any(not c or any(t is None for t in c) for c in snaps):
        return None, "the captured forward did not return plain tensors (one, or a tuple or list of them) every call"
    blank, kept = _blank(snaps)
    # Each graph replayed once, untimed, on the zeroed placeholders: a graph's first launch uploads it, and the timed
    # replays should find both uploaded and the GPU awake.
    _REPLAY(graph)
    _REPLAY(blank)
    _SYNC()
    for place, values in zip(places, sets, strict=True):
        for p, v in zip(place, values, strict=True):
            if isinstance(p, _TENSOR):
                _COPY(p, v)
    _SYNC()
    return Floor(graph, places, raw, snaps, blank, kept), ""


def _blank(snaps: list[list[torch.Tensor]]) -> tuple[Any, tuple]:
    """The batch's output copies alone: one copy per output and call, of zeroed tensors shaped like the first call's
    outputs, captured with no candidate code (see the docstring); (graph, its tensors)."""
    sources = [_ZEROS_LIKE(t) for t in snaps[0]]
    copies: list = []
    graph = _GRAPH()
    _SYNC()
    with _CAPTURING(graph):
        for _ in snaps:
            copies.append([_CLONE(s) for s in sources])
    return graph, (sources, copies)


def _failed(worker: Worker, exc: BaseException) -> str:
    """After a failed capture, why (its first error: the capture's end then only says a previous error ended it); the
    runner thread put back on its default stream (an invalidated capture's exit leaves it on the capture stream,
    where its later work would run outside every timed call's events) and the device synchronised."""
    first = exc
    for _ in range(4):
        inner = getattr(first, "__context__", None)
        if not isinstance(inner, BaseException):
            break
        first = inner
    with contextlib.suppress(BaseException):
        worker.runner.run(_SET_STREAM, _DEFAULT_STREAM())
    with contextlib.suppress(BaseException):  # an invalidated capture may report here once; the next call is clean
        _SYNC()
    text = str(first).splitlines()[0][:200] if str(first) else ""
    return f"{type(first).__name__}: {text}"


def run(floor: Floor, blank: bool = False) -> dict[str, Any]:
    """Replay the staged floor batch (or its blank: the copies alone) and wait for it (an empty batch: the judge's
    round trip alone)."""
    graph = floor.blank if blank else floor.graph
    if graph is not None:
        _REPLAY(graph)
    _SYNC()
    return {"ok": True, "floor_calls": len(floor.raw)}


def outputs(floor: Floor) -> list[torch.Tensor]:
    """The copies of the replay's outputs, call by call (the judge knows each call's output count)."""
    return [t for copies in floor.snaps for t in copies]
