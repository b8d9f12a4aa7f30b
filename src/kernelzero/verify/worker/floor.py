"""The floor batch (judge/floor.py): a timing block's calls captured in one CUDA graph, replayed inside the judge's
clock with no host launch path in it and no candidate Python running.

Staging (`stage`, the worker's `time_stage` with `floor`): zeroed placeholders shaped like the staged sets; the
forward captured once per placeholder set in the runner thread (`seal.CAPTURE_BATCH`, under no_grad; the candidate's
code runs there and only there), each call followed in the graph by a copy of its outputs; then the staged sets are
copied into the placeholders. What the forward computed while it was captured saw zeros, so it is of no use to the
replay. The copies are what the judge checks: each holds what its call's outputs held when the call was done in
stream order, so work batched across the graph's calls (a call that leaves its output to a later one, which then
computes several at once) or overlapped between them (a call's work left on a stream joined only at the end) is
wrong there. Beside it, `blank`: a graph of the same copies alone (outputs shaped alike, no candidate code), whose
replay the judge takes off the batch's (the copies' cost with its own round trip).
Run (`run`): replay the batch or the blank, synchronise, reply with nothing but `ok` (the judge's clock is the
measure). Fetch: the copies of the batch's outputs.

Records: `stage` returns `(Floor, "")`, or `(None, why)` when the forward cannot be captured (a synchronise or host
read inside it, work on a stream the capture does not follow, an allocation the graph refuses): the judge then has no
floor for this verification and keeps its clock check (judge/timing_checks.py), and the verdict says why.

Boundaries: the placeholders and the graph live in the candidate's process; what its code could do to them between
capture and replay runs no candidate Python (nothing of the candidate's is called after the capture), but a kernel
it left resident could: such work occupies the GPU outside every timed call, and the hold before each timed call
waits for every SM (worker/hold.py: its holds are capped and counted).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from kernelzero.verify.worker.seal import CAPTURE_BATCH

if TYPE_CHECKING:
    from kernelzero.verify.worker.worker import Worker


# The mode stacks' lengths as torch defines them, taken when this module is imported, before the worker's watch wraps
# them (worker/watch.py): the capture loop asks them as kernelzero, not as the candidate.
_DEPTHS = (torch._C._len_torch_function_stack, torch._C._len_torch_dispatch_stack)


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
    places = [[torch.zeros_like(v) if isinstance(v, torch.Tensor) else v for v in s] for s in sets]
    graph, raw, snaps = torch.cuda.CUDAGraph(), [], []
    try:
        torch.cuda.synchronize()
        worker.runner.run(
            CAPTURE_BATCH,
            worker.model,
            places,
            torch.cuda.graph(graph),
            raw,
            snaps,
            torch.Tensor,
            torch.Tensor.clone,
            _DEPTHS,
            modes=(torch.no_grad(),),
        )
    except BaseException as exc:  # noqa: BLE001 - any capture failure: no floor, and why
        _settle()
        return None, f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
    # only `type` is asked of what the forward returned (an isinstance could run the candidate's code here)
    if len(snaps) != len(places) or any(not c or any(t is None for t in c) for c in snaps):
        return None, "the captured forward did not return plain tensors (one, or a tuple or list of them) every call"
    for place, values in zip(places, sets, strict=True):
        for p, v in zip(place, values, strict=True):
            if isinstance(p, torch.Tensor):
                p.copy_(v)
    blank, kept = _blank(snaps)
    torch.cuda.synchronize()
    return Floor(graph, places, raw, snaps, blank, kept), ""


def _blank(snaps: list[list[torch.Tensor]]) -> tuple[Any, tuple]:
    """The batch's output copies alone: one copy per output and call, of zeroed tensors shaped like the first call's
    outputs, captured with no candidate code (see the docstring); (graph, its tensors)."""
    sources = [torch.zeros_like(t) for t in snaps[0]]
    copies: list = []
    graph = torch.cuda.CUDAGraph()
    torch.cuda.synchronize()
    with torch.cuda.graph(graph):
        for _ in snaps:
            copies.append([s.clone() for s in sources])
    return graph, (sources, copies)


def _settle() -> None:
    """After a failed capture: the device synchronised (a failed capture leaves no work behind it)."""
    try:
        torch.cuda.synchronize()
    except BaseException:  # noqa: BLE001 - an invalidated capture may report here once; the next call is clean
        pass


def run(floor: Floor, blank: bool = False) -> dict[str, Any]:
    """Replay the staged floor batch (or its blank: the copies alone) and wait for it (an empty batch: the judge's
    round trip alone)."""
    graph = floor.blank if blank else floor.graph
    if graph is not None:
        graph.replay()
    torch.cuda.synchronize()
    return {"ok": True, "floor_calls": len(floor.raw)}


def outputs(floor: Floor) -> list[torch.Tensor]:
    """The copies of the replay's outputs, call by call (the judge knows each call's output count)."""
    return [t for copies in floor.snaps for t in copies]
