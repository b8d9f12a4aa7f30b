"""Timing of a correct candidate: the candidate and the reference interleaved in one exclusive GPU window. Only
correct candidates reach this stage, and only while their judge holds the GPU alone (`lease.exclusive_gpu`).

- **Fresh, checked calls.** Every call (warm-ups included) runs on an input set drawn for it alone from the judge's
  secret seed, in the reference's process, for every dtype, integers included; the kernelbench profile reuses one
  set, as KernelBench does. The outputs of every timed call come back and are compared with the reference's outputs
  on the same set: no call can tell whether it is checked, and a cached result saves nothing. Untimed audit calls
  with the PyTorch op recorder are slipped in before timed calls at positions drawn per block, so a candidate
  that computes with PyTorch only where it is not watched is found (the strict policy's `torch_compute`).
- **Interleaved, same protocol.** The reference runs in its own process with the same worker code
  (`worker/reference_role.py`), so both sides pay the same harness. Blocks alternate reference / candidate in the
  order ABBA (drift cancels), each side on the same input sets. The number of calls fills a time budget
  (`timing_budget_s` per side, at least the profile's `timed_calls`, at most `MAX_CALLS`).
- **The judge's clock bounds the reported times.** The per-call times come from the worker's CUDA events and host
  clock, inside the candidate's process, so they are a claim. Where a batch of the candidate's calls captured in a
  CUDA graph runs long enough in the judge's own clock, that is its floor (judge/floor.py, taken last). Elsewhere the
  judge times every block from sending the command to reading the reply: overhead = (judge's block time - reported
  times - untimed calls at the side's median) / timed calls (`block_overhead`); the candidate's overhead may exceed
  the reference's on the same block by at most the robust noise of the reference's own overhead (`clock_noise`; a floor
  of `OVERHEAD_FLOOR_MS` + 2% of a call), over blocks where no call hit the GPU hold's cap when two such remain.
  Beyond that, the candidate is timed once more (`clock_again`) and that timing is kept, confirmed or corrected by
  the lesser of the two timings' excesses; `timing_check` says which, a note gives the first timing's correction.
- **Confidence.** The speedup: the ratio of the profile's statistic (median; kernelbench: mean), with a 95% bootstrap
  interval (`speedup_ci`); calls under `LAUNCH_BOUND_MS` are flagged launch-bound, not resolvable.
- **Recurring inputs.** KernelBench's protocol (the kernelbench profile) times every call on one input set, so a
  result kept by the input's content (or its address) replays at no cost; the same applies in a C++ static or on
  the device, where no inspection sees it. A candidate faster than the reference there is timed again, both sides
  interleaved as above, on `RECUR_CALLS` fresh sets drawn on the GPU from a secret seed (the profile's seed is
  public): a median speedup on the recurring set more than `RECUR_TOLERANCE` times the fresh one, in two rounds
  (the second times fresh sets first), is `unconfirmed_speedup` unless its gain is under `RECUR_FLOOR_MS` a call
  (launch-bound noise: the fresh sets' speedup is credited); suspect in the first round only, the speedup is the
  second round's (`recurring_input_check`). Each call flushes the L2 cache (worker/timing.py). H200, 2026-12-02:
  two content memos were credited 1.37x and 2.05x on memory-bound tasks whose honest kernels earn about 1x.
- **Work outliving the timed stream.** Under event timing (the kernelbench profile) each call also reports its
  host-bounded time (a device-wide synchronise ends it); a candidate faster than the reference whose gap between
  the two exceeds the reference's gap, in a second timing too, is `unconfirmed_speedup` (`escaped_work`,
  `retime_reason`): a kernel left running on an unjoined stream is credited with its launch alone by the events.
- **Baseline sabotage.** The reference is also timed alone, before any candidate code runs (`solo_reference`, cached
  per GPU in `baselines_dir`); an interleaved reference slower than that beyond the noise, in a second timing too
  (host load stretches one timing, work left on the GPU every one: `retime_reason`), is `tampered`.
"""

from __future__ import annotations

import math
import secrets
import time
from typing import TYPE_CHECKING

import torch

from kernelzero.types import Timing, Verdict
from kernelzero.verify.judge.anticheat import policy_result, probed_message
from kernelzero.verify.judge.compare import compare
from kernelzero.verify.judge.confirm import confirm_speedup
from kernelzero.verify.judge.floor import apply_floor, floor_step
from kernelzero.verify.judge.reference import staged_time
from kernelzero.verify.judge.timing_checks import (
    HOLD_STEPS_US,
    LAUNCH_BOUND_MS,
    block_overhead,
    bootstrap_ci,
    check_clock,
    escaped_work,
    hold_notes,
    next_hold_us,
    record_split,
    replay_noise,
    replay_suspected,
    retime_reason,
    sabotage,
    same_hold,
    steady_times,
    well_formed_reply,
)
from kernelzero.verify.options import profile_of
from kernelzero.verify.worker.timing import summarise

if TYPE_CHECKING:
    from kernelzero.verify.judge.judge import Judge
    from kernelzero.verify.sandbox.worker_process import WorkerProcess

MAX_CALLS = 200  # timed calls per side at most
MIN_BLOCKS = 4  # blocks per side at least: with two, one slow block was half the clock check's median (H200, 12-04)
# Blocks per side at most, once the profile's timed calls are in: each block costs its draws, round trips and output
# checks (a 0.02 ms kernel on 32 MiB sets, 2 calls a block, planned 100 blocks while holding the GPU alone)
MAX_BLOCKS = 16
BLOCK_BYTES = 256 << 20  # input and output bytes one block may hold on the GPU at once (judge side)
AUDITS_PER_BLOCK = 2  # untimed calls with the op recorder per candidate block, at positions drawn per block
RECUR_CALLS = 20  # timed calls per side on fresh sets in the recurring-input check


def _bytes_of(values: list) -> int:
    return sum(t.numel() * t.element_size() for t in values if isinstance(t, torch.Tensor))


def plan_calls(judge: Judge, set_bytes: int, out_bytes: int) -> tuple[int, int]:
    """(timed calls per side, calls per block) for this task: enough calls to fill the time budget (at least the
    profile's `timed_calls`, at most MAX_CALLS), in blocks that fit BLOCK_BYTES, and no more than MAX_BLOCKS blocks
    beyond the profile's `timed_calls` (each block costs its fresh sets' draws and two round trips)."""
    ref_ms = max(judge.stage_s.get("ref_forward_ms", 1.0), 1e-3)
    calls = int(min(MAX_CALLS, max(judge.opts.timed_calls, judge.opts.timing_budget_s * 1e3 / ref_ms)))
    fits = max(1, BLOCK_BYTES // max(1, 2 * set_bytes + 2 * out_bytes))
    per_block = max(1, min(fits, math.ceil(calls / MIN_BLOCKS)))
    return min(calls, max(judge.opts.timed_calls, per_block * MAX_BLOCKS)), per_block


def block_plan(warmup_calls: int, calls: int, per_block: int) -> list[tuple[int, int, int]]:
    """(timed calls, warm-up calls, audit calls) per block of one interleaved timing of `calls` timed calls, in order:
    at least MIN_BLOCKS blocks where the calls allow, the profile's warm-ups before the first block, one before each
    other (judge/predraw.py draws their sets ahead from the same plan)."""
    per_block = min(per_block, max(1, math.ceil(calls / MIN_BLOCKS)))
    sizes = [min(per_block, calls - done) for done in range(0, calls, per_block)]
    return [(m, warmup_calls if k == 0 else 1, min(AUDITS_PER_BLOCK, m)) for k, m in enumerate(sizes)]


def _draw(judge: Judge, count: int, fresh: bool = False) -> list[list]:
    """`count` input sets, fresh per call: each from a seed no earlier draw used (one reused set in the
    kernelbench profile, as KernelBench times one input set: drawn once per verification, on the CPU as KernelBench
    does, each call of this getting its own copy, so nothing a call wrote into its inputs reaches the next block;
    drawn per block it held the H200 idle for over two minutes in one verification, 2026-12-02)."""
    if judge.opts.input_sets == 1 and not fresh:
        prime_inputs(judge)
        base = [x.clone() if isinstance(x, torch.Tensor) else x for x in judge.one_set]
        return [base] * count
    ahead = getattr(judge, "predrawn", None)
    if ahead and not fresh:  # drawn before the exclusive window, with the seeds they would have now (predraw.py)
        taken, judge.predrawn = ahead[:count], ahead[count:]
        return taken + (_draw(judge, count - len(taken)) if len(taken) < count else [])
    first, judge.draws = judge.draws, judge.draws + count
    if judge.opts.input_sets == 1:  # the recurring-input check: fresh sets from a secret seed, drawn on the GPU
        seeds = [judge.check_seed + first + k for k in range(count)]
        return judge.ref.input_sets(seeds, judge.opts.build_timeout_s, on_device=True)
    seeds = [judge.input_seed + 10_000 + first + k for k in range(count)]
    return judge.ref.input_sets(seeds, judge.opts.build_timeout_s)


def prime_inputs(judge: Judge) -> None:
    """Draw the kernelbench profile's one input set now, if not yet drawn (callers do so before they take the GPU
    alone; fresh sets per call are drawn on the GPU, in the reference's process, and need no priming)."""
    if judge.opts.input_sets == 1 and judge.one_set is None:
        judge.one_set = judge.ref.input_sets([judge.input_seed + 10_000], judge.opts.build_timeout_s)[0]


def _audit_positions(warmup: int, timed: int, audits: int) -> list[int]:
    """The timed positions that untimed audit calls come before, drawn by the judge for both sides of a block."""
    return sorted(secrets.SystemRandom().sample(range(warmup, warmup + timed), min(audits, timed)))


def _candidate_block(
    judge: Judge, worker: WorkerProcess, sets: list, warmup: int, host_check: bool, audits: list, before: list[int],
    hold_us: float = 0.0,
):  # fmt: skip
    """(per-call ms, outputs per call, judge's seconds, host-bounded ms, the reply's hold numbers) of one candidate
    block, or a rejecting Verdict. `audits`: input sets for untimed calls with the op recorder, made before the timed
    calls at `before` (their outputs follow the timed calls'). `hold_us`: the GPU hold's least length (worker/hold.py)."""
    timed = len(sets) - warmup
    command = {"sets": sets + audits, "warmup": warmup, "host_check": host_check, "audit": before, "hold_us": hold_us}
    timeout = judge.run_timeout() * 4 + 10 * len(sets)
    reply, tensors, seconds = staged_time(worker, command, timeout, "timing")
    if not reply["ok"]:
        return judge.failed(reply)
    if reply.get("tampered"):
        return judge.verdict("tampered", "timing", f"the harness was tampered with ({reply['tampered']})")
    if reply.get("probes"):
        return judge.verdict("tampered", "timing", probed_message(reply["probes"]))
    if not well_formed_reply(reply):
        return judge.verdict("tampered", "timing", "the timing reply's per-call numbers were removed or malformed")
    if reply.get("calls_without_kernel"):
        n, why = reply["calls_without_kernel"], "launched none of the candidate's kernels (a cached or replayed result)"
        return judge.verdict("no_kernel", "timing", f"{n} timed call(s) {why}")
    if reply.get("torch_ops"):  # seen in an audit call: the strict policy decides (anticheat.policy_result)
        judge.fields["torch_ops"] = tuple(sorted(set(judge.fields.get("torch_ops", ())) | set(reply["torch_ops"])))
    n = reply["n_out"]
    outs = [judge.on_device(tensors[k * n : (k + 1) * n]) for k in range(timed + len(before))]
    extra = {k: reply.get(k) for k in ("launch_ms", "launch_p90_ms", "protocol", "capped", "events_ms", "calls_trace")}
    extra["stage_ms"] = getattr(worker, "stage_ms", 0.0)  # the stage's time in the judge's clock (staged_time)
    return list(reply["times_ms"]), outs, seconds, list(reply.get("held_ms", [])), extra


def _reference_block(judge: Judge, sets: list, warmup: int, host_check: bool, audits=(), before=(), hold_us=0.0):
    """The reference's side of a block: the same calls as the candidate's, audits included, so that both sides
    pay the same harness inside the judge's clock; its outputs (timed, then audits) are the expected ones."""
    timeout = judge.run_timeout() * 4 + 10 * (len(sets) + len(audits))
    sets_all = list(sets) + list(audits)
    times, outs = judge.ref.time(sets_all, warmup, host_check, timeout, audit=list(before), hold_us=hold_us)
    seconds = judge.ref.last["run_s"]  # the run alone: staging and fetching are outside the judge's clock
    if judge.opts.ref_fp64:  # the expected outputs come from the float64 copy
        outs = [judge.ref.expected(s, judge.run_timeout()) for s in [*sets[warmup:], *audits]]
    return times, outs, seconds, getattr(judge.ref, "last_held", []), getattr(judge.ref, "last", {})


def _check_outputs(judge: Judge, expected: list, got: list, sets: list) -> Verdict | None:
    """The verdict of the first wrong output among the timed calls, else None (every call is checked)."""
    for want, have, inputs in zip(expected, got, sets, strict=True):
        failure = compare(want, have, judge.atol, judge.rtol, -1, tie_prone=judge.task.tie_prone, inputs=inputs)
        if failure is not None:
            message = f"an output of a timed call was wrong: {failure.message}"
            return judge.verdict(failure.status, "timing", message, mismatch=failure.mismatch)
    return None


def interleaved(
    judge: Judge, worker: WorkerProcess, host_check: bool, fresh: bool = False, calls: int | None = None
) -> dict | Verdict:
    """Blocks of reference and candidate calls, ABBA, on shared sets (fresh per call unless the profile reuses one,
    and always with `fresh`); per-side times and block overheads. `calls`: timed calls per side (default: planned)."""
    probe = _draw(judge, 1, fresh)[0]
    kept = getattr(judge, "predrawn_out_bytes", None)  # the probe's output bytes, taken before the window (predraw.py)
    out_bytes = kept[1] if kept and kept[0] is probe else _bytes_of(judge.ref.expected(probe, judge.run_timeout()))
    planned, per_block = plan_calls(judge, _bytes_of(probe), out_bytes)
    calls = calls or planned
    sides = {
        side: {k: [] for k in ("times", "overheads", "held", "holds", "events", "launch", "tail", "capped", "sizes")}
        for side in ("ref", "cand")
    }
    hold_us = HOLD_STEPS_US[1]  # longer than most launch paths: most tasks never change it
    for block, (m, warmup, n_audits) in enumerate(block_plan(judge.opts.warmup_calls, calls, per_block)):
        began = time.perf_counter()  # where a block's time goes (blocks_draw/_ref/_cand/_check: bench/verify.md)
        sets = _draw(judge, warmup + m, fresh)
        audits = _draw(judge, n_audits, fresh)
        judge.timed("blocks_draw", began)
        before = _audit_positions(warmup, m, len(audits))
        order = ("ref", "cand") if block % 4 in (0, 3) else ("cand", "ref")
        results = {}
        for side in order:
            began = time.perf_counter()
            if side == "ref":
                got = _reference_block(judge, sets, warmup, host_check, audits, before, hold_us)
            else:
                got = _candidate_block(judge, worker, sets, warmup, host_check, audits, before, hold_us)
                if isinstance(got, Verdict):
                    return got
            results[side] = got
            judge.timed(f"blocks_{side}", began)
        began = time.perf_counter()
        wrong = _check_outputs(judge, results["ref"][1], results["cand"][1], sets[warmup:] + audits)
        judge.timed("blocks_check", began)
        judge.stage_s["blocks"] = judge.stage_s.get("blocks", 0) + 1
        if wrong is not None:
            return wrong
        untimed = warmup + len(audits)  # calls inside the judge's clock but not in the reported times
        for side, (times, _, seconds, held, extra) in results.items():
            for key, more in (("times", times), ("held", held), ("events", list(extra.get("events_ms") or []))):
                sides[side][key] += more
            sides[side]["overheads"].append(block_overhead(seconds * 1e3, times, untimed))
            sides[side]["holds"].append(hold_us)
            sides[side]["capped"].append(int(extra.get("capped") or 0))  # blocks with stalled calls (`check_clock`)
            sides[side]["sizes"].append(len(times))
            sides[side].setdefault("stage", []).append(float(extra.get("stage_ms") or 0.0))  # record_split
            sides[side]["launch"].append(float(extra.get("launch_ms") or 0.0))
            sides[side]["tail"].append(float(extra.get("launch_p90_ms") or 0.0))
            hold_notes(judge, side, extra, (block, hold_us, seconds * 1e3, times, untimed))  # KZ_BLOCK_TRACE too
        hold_us = next_hold_us(hold_us, [results[side][4] for side in ("ref", "cand")])
    record_split(judge, sides, hold_us)
    sides["cand"]["bytes"] = (_bytes_of(probe), out_bytes)
    sides["ref"]["stalls"] = list(sides["ref"]["capped"])  # every block's (`steady_times`): same_hold keeps the last
    return same_hold(sides)


def timed_comparison(judge: Judge, worker: WorkerProcess) -> Verdict:
    """Time the candidate and the reference interleaved (see the module docstring); the final verdict."""
    judge.fields["stage_hint"] = "timing"
    profile = profile_of(judge.opts)
    host_check = profile.host_check or judge.opts.confirming
    start = time.perf_counter()
    sides = interleaved(judge, worker, host_check)
    judge.timed("timing", start)
    if isinstance(sides, Verdict):
        return sides
    checked = _checked(judge, sides, profile.statistic, host_check)
    said, charged = retime_reason(checked, sides, judge.opts.confirming)  # a clock correction, or escaped work
    if said:
        again = clock_again(judge, worker, host_check, profile.statistic, said, charged)
        sides, checked = again if isinstance(again, tuple) else (sides, again)
    if isinstance(checked, Verdict):
        return checked
    first, speedup = sides, checked[2]
    if speedup is not None and speedup > 1.0 and judge.opts.input_sets == 1 and not judge.opts.confirming:
        replayed = recurring_input_check(judge, worker, host_check, sides)
        if isinstance(replayed, Verdict):
            return replayed
        if replayed is not None:  # suspect in one round only: the second round's recurring timing is the one kept
            sides, checked = replayed, _checked(judge, replayed, profile.statistic, host_check)
            if isinstance(checked, Verdict):
                return checked
    compiled = _compiled_reference(judge, host_check) if judge.opts.compile_baseline else None
    on_gpu = judge.device == "cuda"
    floor = floor_step(judge, worker, first, _draw, _check_outputs, BLOCK_BYTES, profile.statistic) if on_gpu else None
    if apply_floor(sides["cand"]["times"], profile.statistic, floor) is not None:
        checked = _checked(judge, sides, profile.statistic, host_check, floor)
        if isinstance(checked, Verdict):
            return checked
    timing, eager, speedup, cand_times, check = checked
    if min(eager.median_ms, timing.median_ms) < LAUNCH_BOUND_MS:
        judge.notes.append(f"launch-bound (a call under {LAUNCH_BOUND_MS * 1e3:.0f} us): speedup not resolvable")
    if speedup is not None and speedup > judge.opts.speedup_cap and not judge.opts.confirming:
        rejected = confirm_speedup(judge, speedup)
        if rejected is not None:
            return rejected
    status, message, per = policy_result(judge, "correct", "")
    stat = f"{profile.statistic}_ms"
    return judge.verdict(
        status,
        "done",
        message,
        timing=timing,
        ref_eager=eager,
        ref_compile=compiled,
        speedup_eager=speedup,
        speedup_compile=getattr(compiled, stat) / getattr(timing, stat) if compiled and speedup else None,
        speedup_ci=bootstrap_ci(steady_times(sides, profile.statistic)[0], cand_times, profile.statistic)
        if speedup
        else None,
        timing_check=check,
        policy_status=per,
    )


def clock_again(
    judge: Judge, worker: WorkerProcess, host_check: bool, statistic: str, said: str, charged: float = math.inf
) -> Verdict | tuple:
    """A timing the clock corrected (`said`, by `charged` ms a call) or refused (`retime_reason`) timed once more: (its
    sides, its `_checked` numbers), or that timing's verdict. The second is kept, confirmed or corrected by at most
    `charged`. Time hidden from the events shows in every timing; host load that stretched an
    honest one's blocks often does not (H200 gate at d8f36e9, 2026-12-04: an honest GEMM corrected by 518 us a call
    in one run, confirmed in its other), and where it stretched both (H100 panel at 3fc765e: 248-471 us a call beside
    two other verifications) the lesser excess is the nearer to the candidate's own time."""
    start = time.perf_counter()
    sides = interleaved(judge, worker, host_check)
    if isinstance(sides, Verdict):
        return sides
    checked = _checked(judge, sides, statistic, host_check, cap=charged)
    judge.timed("clock_again", start)
    if isinstance(checked, Verdict):
        return checked
    judge.notes.append(f"a first timing was {said.split('; its times')[0]}; timed again: {checked[4]}")
    return sides, checked


def _checked(
    judge: Judge, sides: dict, statistic: str, host_check: bool, floor=None, cap: float = math.inf
) -> Verdict | tuple:
    """One timing's numbers after the judge's floor (or its clock check, correcting by `cap` ms a call at most),
    sabotage and escaped-work checks: (timing, eager, speedup, corrected times, the words), or a check's verdict."""
    extra, check = apply_floor(sides["cand"]["times"], statistic, floor) or check_clock(sides)
    if floor is None and extra > cap:
        check = f"{check}; charged {cap * 1e3:.1f} us, the lesser of two timings' excess"
        extra = cap
    ref_times, cand_times = steady_times(sides, statistic)
    cand_times = [t + extra for t in cand_times]
    timing, eager = summarise(cand_times), summarise(ref_times)
    slowed = sabotage(judge.solo_ref, eager)
    if slowed:
        return judge.verdict("tampered", "timing", slowed)
    stat = f"{statistic}_ms"
    speedup = getattr(eager, stat) / getattr(timing, stat) if getattr(timing, stat) > 0 else None
    escaped = escaped_work(sides) if speedup is not None and speedup > 1.0 and not host_check else ""
    if escaped:
        return judge.verdict("unconfirmed_speedup", "timing", escaped)
    return timing, eager, speedup, cand_times, check


def recurring_input_check(judge: Judge, worker: WorkerProcess, host_check: bool, sides: dict) -> Verdict | dict | None:
    """The speedup on the recurring set against the same candidate's on fresh sets (the module docstring's
    "Recurring inputs"): `unconfirmed_speedup` when the recurring set's is more than RECUR_TOLERANCE times the fresh
    sets' in the first round and again in a second one, timed in the other order (fresh sets first), unless the
    second round's gain is within a launch-bound call's noise (`replay_noise`: its fresh-set timing is then kept);
    None when the first round shows nothing (a note gives what was measured); the second round's recurring-set timing
    when only the first round was suspect: the speedup is then taken from it, never from the suspect timing.

    Two rounds: on calls of tens of microseconds host noise alone crosses the tolerance (H200, 2026-12-03: 8 of 88
    honest samples); a replay gains in every round. The second round's timing is kept: a candidate that replays
    until it first sees a fresh set passes the second round, and must not be credited with the first."""
    start = time.perf_counter()
    fresh = interleaved(judge, worker, host_check, fresh=True, calls=RECUR_CALLS)
    if isinstance(fresh, Verdict):
        return fresh
    replayed, said = replay_suspected(sides, fresh)
    recurring, noise = None, ""
    if replayed:
        fresh = interleaved(judge, worker, host_check, fresh=True, calls=RECUR_CALLS)
        recurring = fresh if isinstance(fresh, Verdict) else interleaved(judge, worker, host_check, calls=RECUR_CALLS)
        if isinstance(recurring, Verdict):
            return recurring
        replayed, again = replay_suspected(recurring, fresh)
        said = f"{said.split(': ')[0]}; again, fresh sets first: {again}"
        noise = replay_noise(recurring, fresh, said) if replayed else ""
        replayed, recurring, said = (False, fresh, noise) if noise else (replayed, recurring, said)
    judge.timed("recur_check", start)
    if replayed:
        return judge.verdict("unconfirmed_speedup", "timing", said)
    judge.notes.append(said if recurring is None or noise else f"{said} (the speedup is the second round's)")
    return recurring


def _compiled_reference(judge: Judge, host_check: bool) -> Timing | None:
    sets = _draw(judge, judge.opts.warmup_calls + judge.opts.timed_calls)
    times, _ = judge.ref.time(sets, judge.opts.warmup_calls, host_check, judge.opts.build_timeout_s, compiled=True)
    return summarise(times)
