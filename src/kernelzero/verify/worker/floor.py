"""The floor batch (judge/floor.py): a timing block's calls captured in one CUDA graph, replayed inside the judge's
clock with no host launch path in it and no candidate Python running.

Staging (`stage`, the worker's `time_stage` with `floor`): zeroed placeholders shaped like the staged sets; the
forward captured once per placeholder set in the runner thread (`seal.CAPTURE_BATCH`, under no_grad; the candidate's
code runs there and only there); then the staged sets are copied into the placeholders. What the forward computed
while it was captured saw zeros, so it is of no use to the replay. Run (`run`): replay, synchronise, reply with
nothing but `ok` (the judge's clock is the measure). Fetch: the outputs the replay wrote, checked by the judge.

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
from kernelzero.verify.worker.timed_block import output_tensors

if TYPE_CHECKING:
    from kernelzero.verify.worker.worker import Worker


@dataclass
class Floor:
    """A captured floor batch: the graph, its placeholders (inputs) and the raw outputs of its calls."""

    graph: Any
    places: list
    raw: list


def stage(worker: Worker, sets: list[list]) -> tuple[Floor | None, str]:
    """Capture the forward on placeholders of `sets` (prepared already), then copy `sets` in (see the docstring)."""
    if not sets:
        return Floor(None, [], []), ""
    places = [[torch.zeros_like(v) if isinstance(v, torch.Tensor) else v for v in s] for s in sets]
    graph, raw = torch.cuda.CUDAGraph(), []
    try:
        torch.cuda.synchronize()
        worker.runner.run(CAPTURE_BATCH, worker.model, places, torch.cuda.graph(graph), raw, modes=(torch.no_grad(),))
    except BaseException as exc:  # noqa: BLE001 - any capture failure: no floor, and why
        _settle()
        return None, f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
    if len(raw) != len(places) or any(output_tensors(r) is None for r in raw):
        return None, "the captured forward did not return tensors for every call"
    for place, values in zip(places, sets, strict=True):
        for p, v in zip(place, values, strict=True):
            if isinstance(p, torch.Tensor):
                p.copy_(v)
    torch.cuda.synchronize()
    return Floor(graph, places, raw), ""


def _settle() -> None:
    """After a failed capture: the device synchronised (a failed capture leaves no work behind it)."""
    try:
        torch.cuda.synchronize()
    except BaseException:  # noqa: BLE001 - an invalidated capture may report here once; the next call is clean
        pass


def run(floor: Floor) -> dict[str, Any]:
    """Replay the staged floor batch and wait for it (an empty batch: the judge's round trip alone)."""
    if floor.graph is not None:
        floor.graph.replay()
    torch.cuda.synchronize()
    return {"ok": True, "floor_calls": len(floor.raw)}


def outputs(floor: Floor) -> list[torch.Tensor]:
    """The replay's outputs, call by call (the judge knows each call's output count)."""
    return [t for r in floor.raw for t in output_tensors(r)]
