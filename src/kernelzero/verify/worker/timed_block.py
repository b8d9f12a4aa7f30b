"""A timing block behind the GPU hold (worker/hold.py): the worker's `time` command where the hold runs (every GPU
whose torch can build it) and on the CPU (no clocks there: the same calls and checks, so CI runs this path).

One block is one hand-off to the runner thread (`seal.TIMED_BATCH`): the warm-up calls, then the timed calls with
the audit calls slipped in before the positions the judge drew. Every call runs the same protocol: the hold takes
every SM, the start event, the forward and the end event are queued behind it, the hold is released, the next hold
is queued. So a call's event interval holds the GPU's work for that call alone, not the host's launch path; work the
call leaves on other streams delays the next hold and is measured there (`outlive`). An audit call differs only by
the op recorder, entered around its forward: the candidate cannot tell it from a timed call without probing the
dispatch mode stack (worker/watch.py reports that).

Per timed call the reply has `times_ms` (the event interval; with `host_check` the event interval plus the outlive)
and `held_ms` (always the event interval plus the outlive: the judge's `escaped_work` compares the two), `events_ms`
(the event intervals alone: where a call's time went, for the record), the block's median host time per call from
the hold's start to its release (`launch_ms`: what the forward's launch path costs on the host, which the judge uses
to size `hold_us`; `launch_p90_ms` its 90th percentile, for the record; the wait for the call's GPU work is not in
it, or each block's longer hold would lengthen the next one's, as it did up to the last step on the H200,
2026-12-04), and how many holds hit their cap (`capped`: calls that synchronised the device inside the forward).
"""

from __future__ import annotations

import statistics
import time
from typing import TYPE_CHECKING, Any

import torch

from kernelzero.verify.worker.hold import Hold
from kernelzero.verify.worker.seal import TIMED_BATCH

if TYPE_CHECKING:
    from kernelzero.verify.worker.worker import Worker

_clock = time.perf_counter
# The hold before an audit call lasts at least this long: the op recorder's host cost (a Python call per ATen op) is
# inside the judge's clock for the block, and differs between the candidate and the reference; a hold longer than it
# makes both sides' audits cost the same GPU time (the judge's `check_clock` compares the blocks' overheads).
AUDIT_HOLD_US = 1500.0
_elapsed = torch.cuda.Event.elapsed_time
# What the copies after each call use, bound before any candidate code is imported (and the mode stacks' lengths before
# the worker's watch wraps them: the batch asks them as kernelzero).
_TENSOR, _CLONE = torch.Tensor, torch.Tensor.clone
_DEPTHS = (torch._C._len_torch_function_stack, torch._C._len_torch_dispatch_stack)


class _Idle:
    """The CPU's stand-in for the hold and the events: nothing to wait for, nothing to record."""

    def wait(self) -> None:
        pass

    def settle(self, end=None) -> None:
        pass

    def arm(self) -> None:
        pass

    def record(self, stream=None) -> None:
        pass


_IDLE = _Idle()


def plan(n_sets: int, warmup: int, audit_before: list[int]) -> list[tuple[int, str]]:
    """(set index, kind) per call in the order they run: `warm` for `sets[:warmup]`, `timed` for the sets up to the
    audit sets, `audit` (set `first_audit + j`) just before timed position `audit_before[j]`."""
    first_audit = n_sets - len(audit_before)
    audits = {pos: first_audit + j for j, pos in enumerate(audit_before)}
    order = [(i, "warm") for i in range(warmup)]
    for pos in range(warmup, first_audit):
        if pos in audits:
            order.append((audits[pos], "audit"))
        order.append((pos, "timed"))
    return order


def run_calls(worker: Worker, calls: list[tuple[list, tuple]], hold: Hold | None, mins_us: list[float]) -> dict:
    """Run `calls` ([(inputs, modes)]) in one hand-off, the hold before call k at least `mins_us[k]` long; raw
    values, event ms, outlive ms, launch marks, host s per call and capped holds (no times on the CPU, where `hold`
    is None)."""
    spent: list[float] = []
    marks: list[int] = []
    snaps: list[list] = []

    def count() -> int:
        return sum(worker.guards.launches.values())

    def batch(starts: list, ends: list, stream, on: Any) -> list:
        return worker.runner.run(
            TIMED_BATCH, worker.model, calls, starts, ends, stream, on, _clock, spent, marks, count, snaps, _TENSOR,
            _CLONE, _DEPTHS, modes=(torch.no_grad(),),
        )  # fmt: skip

    if hold is None:
        began = _clock()
        values = batch([_IDLE] * len(calls), [_IDLE] * len(calls), None, _IDLE)
        return {
            "values": values,
            "snaps": snaps,
            "events": [],
            "outlive": [],
            "marks": marks,
            "spent": spent,
            "capped": 0,
            "phases": [0.0, _clock() - began, 0.0],
        }
    began = _clock()
    starts = [torch.cuda.Event(enable_timing=True) for _ in calls]
    ends = [torch.cuda.Event(enable_timing=True) for _ in calls]
    stream = torch.cuda.current_stream()
    hold.begin(stream, [*mins_us, 0.0])
    begun = _clock()
    try:
        values = batch(starts, ends, stream, hold)
    finally:
        ran = _clock()
        outlive, capped = hold.end()
    events = [_elapsed(s, e) for s, e in zip(starts, ends, strict=True)]
    return {
        "values": values,
        "snaps": snaps,
        "events": events,
        "outlive": outlive,
        "marks": marks,
        "spent": spent,
        "capped": capped,
        "phases": [begun - began, ran - begun, _clock() - ran],
    }


def launch_tail(spent_ms: list[float]) -> float:
    """The 90th percentile of a block's launch paths (ms; its longest below ten calls), for the record: a launch path
    longer than the hold puts its excess into the block's time in the judge's clock (`launch_p90_ms`)."""
    if len(spent_ms) < 10:
        return max(spent_ms, default=0.0)
    return statistics.quantiles(spent_ms, n=10)[-1]


def output_tensors(raw: Any) -> list[torch.Tensor] | None:
    """A forward's result as a list of tensors, or None when it is not one tensor or a sequence of them."""
    outs = list(raw) if isinstance(raw, (tuple, list)) else [raw]
    return outs if outs and all(isinstance(o, torch.Tensor) for o in outs) else None


def not_tensors(raw: Any, stage: str) -> dict[str, Any]:
    """The failure reply for a forward that did not return tensors (`shape_mismatch`)."""
    kinds = ", ".join(type(o).__name__ for o in (raw if isinstance(raw, (tuple, list)) else [raw])) or "nothing"
    message = f"forward must return tensors, returned {kinds}"
    return {"ok": False, "status": "shape_mismatch", "stage": stage, "message": message, "log": ""}


def not_plain(stage: str) -> dict[str, Any]:
    """The failure reply for a timed call whose outputs could not be copied as they were (`bad_output`)."""
    message = "a timed call returned a tensor that is not a plain torch.Tensor, or left a torch mode active"
    return {"ok": False, "status": "bad_output", "stage": stage, "message": message, "log": ""}


def calls_record(order: list[tuple[int, str]], got: dict) -> dict[str, list]:
    """Every call's numbers in the order they ran, warm-ups and audits included: its kind, event interval and host
    launch path, and the block's outlive; and the block's phases in the worker's clock (`phases_ms`: the hold's begin
    with its calibration unless staged, the hand-off running every call, the hold's end with the events read). A
    record (KZ_BLOCK_TRACE, judge/block_trace.py), never judged."""
    return {
        "kinds": [kind for _, kind in order],
        "events_ms": got["events"],
        "spent_ms": [s * 1e3 for s in got["spent"]],
        "outlive_ms": got["outlive"][:1],
        "phases_ms": [p * 1e3 for p in got["phases"]],
    }


def hold_mins(req: dict[str, Any], order: list[tuple[int, str]]) -> list[float]:
    """The least length (us) of the hold before each call of `order`: the judge's `hold_us`, an audit's at least
    AUDIT_HOLD_US."""
    least = float(req.get("hold_us", 0.0))
    return [max(least, AUDIT_HOLD_US) if kind == "audit" else least for _, kind in order]


def stage_hold(worker: Worker, req: dict[str, Any], n_sets: int) -> None:
    """With the stage command's `calibrate` (the judge's `KZ_STAGE_CALIBRATE`), the hold's calibration for the
    block now (`Hold.calibrate`, for the first call's length), in the stage's round trip, so the judge's clock for
    the block (`time_run`) holds the block's calls alone. Nothing on the CPU, for a floor batch or where the hold
    cannot run. Untrusted as before: the numbers it sets live in the worker's process, which the judge's clock
    bounds whatever they are."""
    if not req.get("calibrate") or req.get("floor") or not worker.device.startswith("cuda"):
        return
    if worker.hold is False:
        worker.hold = Hold.create(worker.device)
    if worker.hold:
        mins = hold_mins(req, plan(n_sets, req["warmup"], list(req.get("audit", []))))
        worker.hold.calibrate(torch.cuda.current_stream(), mins[0] if mins else 0.0)


def time_block(worker: Worker, req: dict[str, Any], sets: list[list], hold: Hold | None) -> tuple[dict, list]:
    """A timing block under the hold (see the module docstring): (reply, output tensors: the timed calls', then the
    audits')."""
    order = plan(len(sets), req["warmup"], list(req.get("audit", [])))
    watch = worker.guards.watch
    try:
        with worker.guards.observe(record_ops=True) as modes:
            calls = [(sets[i], modes if kind == "audit" else ()) for i, kind in order]
            mins = hold_mins(req, order)
            watch.in_forward = True  # the whole block, once: nothing is switched between audits and timed calls
            try:
                got = run_calls(worker, calls, hold, mins)
            finally:
                watch.in_forward = False
                watch.end_call(len(sets))
    except BaseException as exc:
        return worker.error_reply(exc, "timing"), []
    outs, audited, without_kernel, times, held, spent, events = [], {}, 0, [], [], [], []
    for k, ((index, kind), raw) in enumerate(zip(order, got["values"], strict=True)):
        tensors = got["snaps"][k]  # the copies taken right after the call: what the judge checks (seal.TIMED_BATCH)
        if any(t is None for t in tensors):
            return (not_tensors(raw, "timing") if output_tensors(raw) is None else not_plain("timing")), []
        launched = got["marks"][k] - (got["marks"][k - 1] if k else 0)
        if kind != "warm" and not launched:
            without_kernel += 1
        if kind == "audit":
            audited[index] = tensors
        elif kind == "timed":
            outs.append(tensors)
            spent.append(got["spent"][k] * 1e3)
            if got["events"]:
                events.append(got["events"][k])
                held.append(got["events"][k] + got["outlive"][k])
                times.append(held[-1] if req["host_check"] else got["events"][k])
    host, probes = watch.take()
    reply = {
        "ok": True,
        "times_ms": times,
        "held_ms": held,
        "events_ms": events,
        "n_out": len(outs[0]) if outs else 0,
        "calls_without_kernel": without_kernel,
        "torch_ops": sorted(set(worker.guards.last_ops) | set(host)),
        "probes": probes,
        "tampered": worker.guards.tampered(),
        "protocol": "hold" if hold is not None else "cpu",
        "launch_ms": statistics.median(spent) if spent else 0.0,
        "launch_p90_ms": launch_tail(spent),
        "capped": got["capped"],
        "calls_trace": calls_record(order, got),
    }
    audits = [audited[i] for i in sorted(audited)]  # in the order of their sets, as the judge sent them
    return reply, [t for tensors in outs + audits for t in tensors]
