"""The judge's floor under a candidate's per-call time (issue 26, item 1): a batch of its calls on fresh sets,
captured in a CUDA graph and replayed inside the judge's own clock (worker/floor.py), whose outputs are checked like
every timed call's. Nothing the candidate's process reports enters it: the judge's time for the replay, less the
replay of the same output copies alone (which holds its own round trip), over the calls.

Why a graph. On the H200 (2026-12-04, bench/verify.md) a batch of eager calls was bound by the host's launch path (in
the sandboxed worker 30-300 us a call, above a 62 us softmax's kernel); a graph has no launch path, and back to back
its calls ran within 3% under their time behind the GPU hold from about 30 us up (0.82 for a 12 us ReLU).

- **Size**: as many calls as reach `FLOOR_MS` of GPU work at the candidate's reported rate (a small claim gets a
  long batch), at most `FLOOR_CALLS`, no more than the reference runs in `REF_BATCH_MS` (it runs the same sets: its
  outputs are the expected ones), no more sets than `FLOOR_SET_BYTES` (drawn inside the exclusive window), and no
  more than one timing block's bytes (`timing_stage.BLOCK_BYTES`: each call's sets and outputs, and the placeholders
  the capture used). Small sets get the whole batch; a 64 MB set gets one call.
- **Round trip**: the median of the judge's times for `ROUND_TRIPS` empty floor batches on each side's worker,
  measured first (`robust_trip`): the host's load makes single slow trips, and the largest of three refused the
  re-recording cheat its floor beside the gate's 8 workers on an H100 (2026-12-05: "146 calls fit, about 55.85 ms:
  too short against its round trip"). The reference's decides (`long_enough`): the candidate's process can stretch
  its own trips to be refused a floor, never the reference's. Where a batch that fits could not reach `LONG_ENOUGH`
  of them at the slower side's reported rate, no batch is run (a note says so): a floor batch costs its sets' draws,
  transfers and output checks inside the exclusive GPU window.
- **Checked in stream order**: each call in the graph is followed by a copy of its outputs, and the judge checks the
  copies (worker/floor.py), so calls cannot share work across the batch (one call computing several calls' outputs)
  or overlap (a call's work left on a stream joined at the end): the floor is the time of calls done one after
  another, as timed calls are. The batch's staged blank (the same copies alone, no candidate code) is replayed
  `ROUND_TRIPS` times after it on each side (before it, the staged sets would wait in the candidate's process for as
  many round trips outside the judge's clock: a hidden background thread could compute ahead there), and the lower
  of the two sides' medians is taken off the batch's: its copies and round trip (both graphs were replayed once
  untimed when staged, so neither timed replay pays a first launch's upload). The lower, because a candidate that
  slows its own blank replays would lower its floor by as much; the reference's blank holds the same copies (its
  outputs match the candidate's in number and shape).
- **Use** (`apply_floor`): where the batch's GPU time is at least `LONG_ENOUGH` times the round trip, the floor
  replaces the clock check (judge/timing_checks.py `check_clock`, whose block overheads carry the host's noise): the
  candidate's statistic is raised to the floor when the floor exceeds it by more than `FLOOR_TOLERANCE`; otherwise
  the clock check decides, as before, and the floor is recorded.
- **Same protocol**: the reference's floor batch is the same protocol on the same sets, so what the floor adds to a
  call beyond its reported time (a graph replayed alone after an idle GPU: on an H100, 2026-12-05, one 21 ms matmul
  call read 4-7% over its events on both sides, and honest Triton GEMMs were raised by it) shows in the reference's
  floor over its reported statistic (`harness_share`, at most `MAX_HARNESS_SHARE`), and the candidate's floor is
  divided by it before it is compared. The reference is the task's own code, which the candidate cannot slow inside
  its batch (each worker's device work ends before it replies).
- **Raised only when it repeats**: a floor that would raise the candidate is taken once more on fresh sets, up to
  `FLOOR_TRIES` batches, and the lowest kept (`lower_floor`). Each batch is a full measure of calls done one after
  another on sets the candidate has not seen (captured on zeros, checked), so the lowest is still one: a candidate
  that hides time from its own events is raised by every batch, while the host's load, which only ever lengthens
  a batch in the judge's clock, seldom strikes twice.
- **Last**: taken after every other timing check (the recurring inputs, the compiled reference), so a forward the
  graph cannot capture disturbs none of them; the 10x cap's second verification then sees the floored speedup.
- **No floor** when either side's forward cannot be captured (a synchronise or host read in it, a stream the capture
  does not follow), or when the candidate's outputs in the graph are wrong (an honest kernel launched on the legacy
  default stream is not captured, so no verdict is drawn from them; a forward that shares work across the graph's
  calls only loses its floor): the clock check decides, and a note says why. The floor only ever adds to a verdict.

Records: `take_floor` returns None (no floor; a note says why) or `{"cand_ms", "ref_ms", "calls", "round_trip_ms",
"blank_ms", "batch_ms", "tries"}` (`round_trip_ms`: the reference's robust trip; `blank_ms`: the blank taken off,
the lower side's median; `tries`: floor batches taken; `floor_step` adds `ref_reported_ms`, the reference's
statistic); `apply_floor` returns (ms added to each candidate call, the words for `Verdict.timing_check`), or None
where the clock check decides.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from kernelzero.verify.judge.reference import staged_time
from kernelzero.verify.judge.task_source import TaskBroken
from kernelzero.verify.sandbox.worker_process import WorkerDied

if TYPE_CHECKING:
    from kernelzero.verify.judge.judge import Judge
    from kernelzero.verify.sandbox.worker_process import WorkerProcess

# GPU time a floor batch aims at: LONG_ENOUGH round trips of up to 5 ms (beside the GPU gate's other tests on the
# H200 a round trip took up to 1.4 ms, 2026-12-04: a 20 ms batch was refused there)
FLOOR_MS = 50.0
FLOOR_CALLS = 256  # calls in a floor batch at most (each costs a set drawn and an output sent and checked)
REF_BATCH_MS = 100.0  # the reference's floor batch at its reported rate at most (it bounds the batch's calls)
# Bytes of fresh input sets a floor batch draws at most: the reference's process draws them on the host and both
# workers take them, all inside the exclusive GPU window (for 1 MiB sets: 64 calls, not 256)
FLOOR_SET_BYTES = 64 << 20
ROUND_TRIPS = 5  # empty floor batches timed per side for the judge's own round trip (their median is taken)
LONG_ENOUGH = 10.0  # batch GPU time / round trip at which the floor replaces the clock check
FLOOR_TOLERANCE = 0.03  # the floor may exceed the candidate's statistic by this share before it is raised
FLOOR_TRIES = 2  # floor batches at most, on fresh sets each, before a candidate is raised (the lowest is kept)
# The most of the reference's floor over its reported time taken off the candidate's floor (Same protocol): on an H100
# (2026-12-05, c5c95cc) one 8192^3 matmul call replayed alone read 6.9% over its events for cuBLAS, 4.0% for Triton
MAX_HARNESS_SHARE = 0.15


def floor_calls(set_bytes: int, out_bytes: int, per_call_ms: float, block_bytes: int, ref_ms: float = 0.0) -> int:
    """Calls in a floor batch (see the docstring's Size): `per_call_ms` the candidate's reported median, `ref_ms` the
    reference's."""
    # sets, placeholders, staged copies; outputs, their copies, the blank's copies, the copies fetched
    fits = block_bytes // max(1, 3 * set_bytes + 4 * out_bytes)
    want = math.ceil(FLOOR_MS / max(per_call_ms, 1e-4))
    reference = math.ceil(REF_BATCH_MS / max(ref_ms, 1e-4))
    drawn = FLOOR_SET_BYTES // max(1, set_bytes)
    return max(1, min(FLOOR_CALLS, fits, want, reference, drawn))


def robust_trip(trips: list[float]) -> float:
    """The round trip a side's empty floor batches show (ms): their median, so one slow trip moves nothing."""
    return statistics.median(trips) if trips else 0.0


def long_enough(calls: int, per_call_ms: float, ref_trip_ms: float) -> bool:
    """Whether a batch of `calls` at `per_call_ms` (the slower side's reported rate) reaches LONG_ENOUGH round trips
    of the reference's worker (see the docstring's Round trip)."""
    return calls * per_call_ms >= LONG_ENOUGH * ref_trip_ms


def reported_ms(times: list[float], statistic: str) -> float:
    """The candidate's reported statistic per call, which the floor confirms or raises."""
    return statistics.median(times) if statistic == "median" else statistics.fmean(times)


def raises(times: list[float], statistic: str, floor: dict | None) -> bool:
    """Whether `floor` would raise a candidate that reported `times` (see `apply_floor`)."""
    applied = apply_floor(times, statistic, floor)
    return applied is not None and applied[0] > 0.0


def lower_floor(first: dict | None, again: dict | None) -> dict | None:
    """Of two floors on fresh sets, the one that saw the candidate's calls faster, counting the batches taken."""
    kept = min((f for f in (first, again) if f), key=lambda f: f["cand_ms"], default=None)
    if kept is not None:
        kept = {**kept, "tries": sum(int(f.get("tries", 1)) for f in (first, again) if f)}
    return kept


def _round_trip(worker: WorkerProcess, timeout_s: float, what: str) -> tuple[float, str]:
    """(ms, why it failed) of `robust_trip` over ROUND_TRIPS empty floor batches on `worker`, in the judge's clock."""
    trips = []
    for _ in range(ROUND_TRIPS):
        reply, _, seconds = staged_time(worker, {"sets": [], "floor": True}, timeout_s, what)
        if not reply.get("ok"):
            return 0.0, str(reply.get("message") or "the empty floor batch failed")
        trips.append(seconds * 1e3)
    return robust_trip(trips), ""


def _timed_round(worker: WorkerProcess, command: dict, timeout_s: float, what: str) -> tuple[dict, float]:
    """(reply, seconds in the judge's clock) of one command."""
    start = time.perf_counter()
    worker.send(command)
    reply, _ = worker.receive(timeout_s, what)
    return reply, time.perf_counter() - start


def _batch(worker: WorkerProcess, sets: list, timeout_s: float, what: str):
    """(ms of the batch's replay, output tensors, why there is none, ms of the median blank replay) of one side's floor
    batch on `sets`: staged, the batch replayed once at once, then its blank ROUND_TRIPS times (after it: the sets
    wait in the candidate's process for one round trip only before the judge's clock starts), its copies fetched."""
    worker.send({"cmd": "time_stage", "sets": sets, "floor": True})
    reply, _ = worker.receive(timeout_s, what)
    if reply.get("ok") and not reply.get("unavailable"):
        reply, seconds = _timed_round(worker, {"cmd": "time_run"}, timeout_s, what)
    blanks = []
    while reply.get("ok") and not reply.get("unavailable") and len(blanks) < ROUND_TRIPS:
        done, blank = _timed_round(worker, {"cmd": "time_run", "blank": True}, timeout_s, what)
        if not done.get("ok"):
            reply = done
            break
        blanks.append(blank)
    if not reply.get("ok"):
        return 0.0, [], str(reply.get("message") or "the floor batch failed"), 0.0
    if reply.get("unavailable"):
        return 0.0, [], f"a forward not captured in a CUDA graph: {reply['unavailable']}", 0.0
    worker.send({"cmd": "time_fetch"})
    _, tensors = worker.receive(timeout_s, what)
    return seconds * 1e3, tensors, "", statistics.median(blanks) * 1e3


def _no_floor(judge: Judge, why: str) -> None:
    judge.notes.append(f"no floor from the judge's clock ({why[:240]})")


def take_floor(judge: Judge, worker: WorkerProcess, sets: list, ref_trip: float, check: Callable) -> dict | None:
    """Both sides' floor batches on `sets` (the reference's first: its outputs are the expected ones; `ref_trip`: the
    reference's round trip, ms), the candidate's outputs checked by `check(expected, got, sets)` (a Verdict when one
    is wrong); see Records."""
    # a batch is FLOOR_MS of GPU time at the reported rates (REF_BATCH_MS for the reference), its capture a forward's
    # Python per call: the forward's own limit covers either (a replay that does not end is the side's timeout)
    timeout = judge.run_timeout() + 30
    try:
        ref_run, ref_out, why, ref_blank = _batch(judge.ref.worker, sets, timeout, "the reference's floor batch")
    except WorkerDied as exc:  # the task's own forward, captured: the task's fault, as everywhere (judge/reference.py)
        raise TaskBroken(f"the task's reference process failed during its floor batch ({exc.status}): {exc}") from None
    if not why:
        cand_run, cand_out, why, cand_blank = _batch(worker, sets, timeout, "the floor batch")
    if why:
        return _no_floor(judge, why)
    n_ref, n_cand = len(ref_out) // len(sets), len(cand_out) // len(sets)
    if n_ref * len(sets) != len(ref_out) or n_cand != n_ref or n_cand * len(sets) != len(cand_out):
        return _no_floor(judge, "its outputs in the CUDA graph do not match the reference's in number")
    expected = [judge.on_device(ref_out[k * n_ref : (k + 1) * n_ref]) for k in range(len(sets))]
    if judge.opts.ref_fp64:
        expected = [judge.ref.expected(s, judge.run_timeout()) for s in sets]
    got = [judge.on_device(cand_out[k * n_cand : (k + 1) * n_cand]) for k in range(len(sets))]
    wrong = check(expected, got, sets)
    if wrong is not None:  # see the docstring's No floor: a verdict is never drawn from the graph's outputs
        return _no_floor(judge, f"its outputs in the CUDA graph were wrong: {wrong.message}")
    blank = min(ref_blank, cand_blank)  # see the docstring's Checked in stream order
    cand_ms, ref_ms = max(0.0, cand_run - blank) / len(sets), max(0.0, ref_run - ref_blank) / len(sets)
    return {
        "cand_ms": cand_ms,
        "ref_ms": ref_ms,
        "calls": len(sets),
        "round_trip_ms": ref_trip,
        "blank_ms": blank,
        "batch_ms": cand_ms * len(sets),
        "tries": 1,
    }


def floor_step(
    judge: Judge, worker: WorkerProcess, sides: dict, draw: Callable, check: Callable, block_bytes: int, statistic: str
):
    """The floor for an interleaved timing (`sides`, with the candidate's set and output bytes): both sides' round
    trips first; then, unless a batch that fits could not reach LONG_ENOUGH of the reference's round trips at the
    slower side's reported rate (no floor, a note says so), fresh sets drawn by `draw(judge, count, fresh=True)` and
    checked by `check(judge, expected, got, sets)`, again on fresh sets while the floor would raise the candidate's
    `statistic` (FLOOR_TRIES batches at most, the lowest kept); what `take_floor` returns, recorded in `stage_s`."""
    timeout = judge.run_timeout() + 30
    trips = []
    for side, what in ((judge.ref.worker, "the reference's floor batch"), (worker, "the floor batch")):
        trip, why = _round_trip(side, timeout, what)
        if why:
            return _no_floor(judge, why)
        trips.append(trip)
    set_bytes, out_bytes = sides["cand"]["bytes"]
    medians = {s: statistics.median(sides[s]["times"]) for s in ("ref", "cand") if sides[s]["times"]}
    per_call = max(medians.values(), default=1.0)  # the side the candidate cannot shorten, when it is the slower
    calls = floor_calls(set_bytes, out_bytes, medians.get("cand", 1.0), block_bytes, medians.get("ref", 0.0))
    if not long_enough(calls, per_call, trips[0]):
        return _no_floor(
            judge,
            f"{calls} calls fit, about {calls * per_call:.2f} ms: too short against its round trip ({trips[0]:.2f} ms)",
        )
    floor, ref_reported = None, reported_ms(sides["ref"]["times"], statistic) if sides["ref"]["times"] else 0.0
    for _ in range(FLOOR_TRIES):
        sets = draw(judge, calls, fresh=True)
        again = take_floor(judge, worker, sets, trips[0], lambda want, got, xs: check(judge, want, got, xs))
        if again is not None:
            again["ref_reported_ms"] = ref_reported
        floor = lower_floor(floor, again)
        if again is None or not raises(sides["cand"]["times"], statistic, floor):
            break
    if floor is not None:
        for key, value in {**floor, "cand_round_trip_ms": trips[1]}.items():
            judge.stage_s[f"floor_{key}"] = round(float(value), 6)
    return floor


def harness_share(floor: dict) -> float:
    """What the floor's protocol itself adds to a call, as the reference shows it: its floor over its reported
    statistic (`ref_reported_ms`), at least 1 and at most 1 + MAX_HARNESS_SHARE (see the docstring's Same protocol)."""
    reported = float(floor.get("ref_reported_ms") or 0.0)
    if reported <= 0 or not math.isfinite(reported):
        return 1.0
    return min(1.0 + MAX_HARNESS_SHARE, max(1.0, floor["ref_ms"] / reported))


def apply_floor(times: list[float], statistic: str, floor: dict | None) -> tuple[float, str] | None:
    """(ms to add to each candidate call, the words) from the floor, or None where the clock check decides."""
    if not floor or not times or floor["batch_ms"] < LONG_ENOUGH * floor["round_trip_ms"]:
        return None
    reported, share = reported_ms(times, statistic), harness_share(floor)
    due = floor["cand_ms"] / share  # the candidate's floor less what the protocol adds to the reference's calls
    seen = (
        f"the judge's clock saw {floor['cand_ms'] * 1e3:.1f} us a call over {floor['calls']} calls replayed in a CUDA "
        f"graph (its own round trip {floor['round_trip_ms'] / max(floor['batch_ms'], 1e-9):.1%} of the batch; the "
        f"reference's floor {share - 1:.1%} over its reported time taken off)"
    )
    said = f"{seen}, the candidate reported {reported * 1e3:.1f} us"
    if due <= reported * (1 + FLOOR_TOLERANCE):
        return 0.0, f"confirmed by the judge's floor: {said}"
    return due - reported, f"raised to the judge's floor: {said}"
