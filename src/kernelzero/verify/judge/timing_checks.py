"""The decisions of the timing stage (judge/timing_stage.py), as functions of the measured per-call times alone: the
judge's clock against the reported times (`block_overhead`, `check_clock`), the speedup's interval (`bootstrap_ci`),
baseline sabotage (`sabotage`), work outliving the timed stream (`escaped_work`) and a replayed recurring input
(`replay_suspected`). Kept apart from the stage's GPU work so each can be tested on numbers."""

from __future__ import annotations

import math
import statistics

import numpy as np

from kernelzero.types import Timing, Verdict
from kernelzero.verify.judge import block_trace

OVERHEAD_FLOOR_MS = 0.01  # per call: a candidate's overhead may exceed the reference's by this much at least
RECUR_TOLERANCE = 1.25  # a speedup on the recurring set may be this many times the fresh one (noise, no more)
# per call: a replay must also save the candidate this much on the recurring set (what its fresh-set speedup predicts
# there, less what it took); below it the ratio is the host's noise on a launch-bound call (`replay_gain_ms`)
RECUR_FLOOR_MS = 0.01
LAUNCH_BOUND_MS = 0.02  # below this per call, launch overhead dominates: the speedup is flagged (timing_stage)
ESCAPE_FLOOR_MS = 0.02  # per call: the candidate's held-minus-event gap may exceed the reference's by this much
ESCAPE_SHARE = 0.15  # or by this share of its held time, whichever is larger (see `escaped_work`)
ESCAPED = "the candidate's work outlived its timed stream"  # `escaped_work`'s words, which `retime_reason` looks for
SABOTAGE_TOLERANCE = 0.10  # the interleaved reference may be this much slower than alone (or 2x its spread)
SABOTAGE_FLOOR_MS = 0.03  # and this much more per call in any case (host noise on launch-bound calls, `sabotage`)
SLOWED = "the reference ran"  # `sabotage`'s words, which `retime_reason` looks for


def block_overhead(judge_ms: float, times: list[float], untimed: int) -> float:
    """Per timed call, what the judge's clock saw beyond the reported times: its block time minus the reported
    times and minus the untimed calls (warm-ups, audits), each counted at the median reported time.

    Untimed calls cost what a call of that side costs, so they are taken out at that side's own rate: a slower
    honest candidate is not charged for its slower warm-ups. A candidate that reports less than it takes is
    charged for every call, timed or not: its overhead grows by the missing time times all its calls.
    """
    if not times:
        return 0.0
    return (judge_ms - sum(times) - untimed * float(np.median(times))) / len(times)


def clean_blocks(sides: dict) -> tuple[np.ndarray, np.ndarray]:
    """Both sides' block overheads, paired, without the blocks where either side had a call stalled to the GPU
    hold's cap (`capped`), when at least two pairs remain (else every block). A stalled call carries up to the cap's
    2 ms of host time into its block's overhead: in the H200 gate at b7077c4 (2026-12-04), beside the other tests,
    such blocks made the reference's noise allow 4.6 ms a call, and a candidate hiding 1.07 ms a call of a 0.27 ms
    kernel from its events was confirmed at 19.3x. The counts are the workers' words: a candidate claiming stalls
    only removes its own pairs, whose excess the remaining pairs show alike, or all of them (every block kept)."""
    ref_o, cand_o = np.array(sides["ref"]["overheads"]), np.array(sides["cand"]["overheads"])
    ref_c, cand_c = sides["ref"].get("capped"), sides["cand"].get("capped")
    if ref_c is None or cand_c is None or not len(ref_c) == len(cand_c) == len(ref_o) == len(cand_o):
        return ref_o, cand_o
    clean = np.array([not (r or c) for r, c in zip(ref_c, cand_c, strict=True)], dtype=bool)
    return (ref_o[clean], cand_o[clean]) if clean.sum() >= 2 else (ref_o, cand_o)


def clock_noise(ref_o: np.ndarray) -> float:
    """The standard error of the median paired excess `check_clock` takes, from the reference's block overheads: a
    robust spread (1.4826 times their median absolute deviation, the standard deviation for normal noise), times
    sqrt(2 / n) for a difference of two sides, times 1.2533 for a median's error against a mean's.

    Robust because the host's noise is heavy-tailed: in the H200 gate at 08bef74 (2026-12-04), beside the other
    tests, a few bench-size blocks (one call each) took tens of ms longer in the judge's clock, their standard
    deviation allowed 13.0 ms a call, and a candidate hiding its kernel from its events (621 us a call in the paired
    median) was confirmed at 11.0x. A few slow blocks move the median absolute deviation no more than the median."""
    if len(ref_o) < 2:
        return 0.0
    spread = 1.4826 * float(np.median(np.abs(ref_o - np.median(ref_o))))
    return 1.2533 * spread * math.sqrt(2 / len(ref_o))


def check_clock(sides: dict) -> tuple[float, str]:
    """(ms to add to each candidate call, what the check found) from the blocks' overheads (see the docstring), over
    `clean_blocks`, against `clock_noise`."""
    ref_o, cand_o = clean_blocks(sides)
    excess = float(np.median(cand_o - ref_o))  # per block, paired; the median: one slow block is not a trend
    noise = clock_noise(ref_o)
    per_call = float(np.median(sides["cand"]["times"])) if sides["cand"]["times"] else 0.0
    allowed = 3 * noise + OVERHEAD_FLOOR_MS + 0.02 * per_call
    low, high = (float(np.percentile(cand_o - ref_o, q)) * 1e3 if len(ref_o) else 0.0 for q in (25, 75))
    spread = f"blocks' excess {low:.0f}..{high:.0f} us (quartiles of {len(ref_o)})"  # one slow block, or every block
    if excess <= allowed:
        said = f"excess overhead {excess * 1e3:.1f} us <= {allowed * 1e3:.1f} us; {spread}"
        return 0.0, f"confirmed by the judge's clock ({said})"
    return excess, (
        f"corrected: the judge's clock saw {excess * 1e3:.1f} us per call more than the candidate reported "
        f"(allowed {allowed * 1e3:.1f} us; {spread}); its times include that excess"
    )


def steady_times(sides: dict, statistic: str) -> tuple[list[float], list[float]]:
    """(the reference's times, the candidate's) for `statistic`: under the mean (the kernelbench profile's), without
    the blocks in which the reference's calls hit the GPU hold's cap (`stalls`, per block; `sizes`: timed calls per
    block), where at least half the blocks are left; else, and under the median, every time.

    A call that hits the cap carries its host time (over 2 ms) into its event interval. The median shrugs a few off;
    the mean does not: in the H100 gate at c5c95cc (2026-12-05) an honest 27 us GELU read 17x under the kernelbench
    profile, its reference's calls stalled by the host's load, and lost its `correct` to the 10x cap's second
    verification (1.06x). Only the reference's stalls count: they are the task's own process's words, while a
    candidate that claimed stalls could choose which of its blocks are left. Both sides lose the same blocks."""
    ref, cand = list(sides["ref"]["times"]), list(sides["cand"]["times"])
    stalls, sizes = sides["ref"].get("stalls") or [], sides["ref"].get("sizes") or []
    aligned = len(stalls) == len(sizes) and sum(sizes) == len(ref) == len(cand) and sizes == sides["cand"].get("sizes")
    keep = [not s for s in stalls]
    if statistic != "mean" or not aligned or all(keep) or 2 * sum(keep) < len(keep):
        return ref, cand
    mask = [k for k, n in zip(keep, sizes, strict=True) for _ in range(n)]
    return [t for t, k in zip(ref, mask, strict=True) if k], [t for t, k in zip(cand, mask, strict=True) if k]


def bootstrap_ci(ref: list[float], cand: list[float], statistic: str, draws: int = 2000) -> tuple[float, float]:
    """95% percentile interval of stat(ref) / stat(cand), resampling each side's calls, all draws at once: it runs
    while the GPU is held alone, where a draw at a time took 50-90 ms of a 0.58 s window (H200 step, 92a41dc)."""
    rng = np.random.default_rng(0)
    r, c = np.asarray(ref, dtype=float), np.asarray(cand, dtype=float)
    stat = np.median if statistic == "median" else np.mean
    ref_stats = stat(r[rng.integers(0, r.size, (draws, r.size))], axis=1)
    cand_stats = stat(c[rng.integers(0, c.size, (draws, c.size))], axis=1)
    low, high = np.percentile(ref_stats / cand_stats, [2.5, 97.5])
    return round(float(low), 4), round(float(high), 4)


def sabotage(solo: Timing | None, beside: Timing) -> str:
    """Why the reference timed beside the candidate is too slow against its solo timing ('' when it is not).

    Allowed: the larger of SABOTAGE_TOLERANCE and twice the solo run's spread, plus SABOTAGE_FLOOR_MS, the host's
    noise on a launch-bound call (its solo timing and this one come from different processes, often minutes apart):
    on the H200 (2026-12-03) an honest 5 us ReLU's reference took 0.0229 ms alone and 0.0412 ms beside it, and was
    called `tampered` without the floor."""
    if solo is None or solo.median_ms <= 0:
        return ""
    spread = (solo.p90_ms - solo.p10_ms) / solo.median_ms
    limit = solo.median_ms * (1 + max(SABOTAGE_TOLERANCE, 2 * spread)) + SABOTAGE_FLOOR_MS
    if beside.median_ms <= limit:
        return ""
    slower = beside.median_ms / solo.median_ms - 1
    return (
        f"{SLOWED} {slower:.0%} slower beside the candidate than alone ({beside.median_ms:.4f} vs "
        f"{solo.median_ms:.4f} ms): work the candidate left on the GPU slows the baseline"
    )


def well_formed_times(times: object, held: object) -> bool:
    """Whether a timing reply's per-call times (`times_ms`) and host-bounded times (`held_ms`) are what the worker
    writes: two lists of finite numbers of the same length. Anything else was written by other code in the
    candidate's process (dropping `held_ms` would switch `escaped_work` off): the judge says `tampered`."""

    def numbers(values: object) -> bool:
        return isinstance(values, list) and all(type(x) in (int, float) and math.isfinite(x) for x in values)

    return numbers(times) and numbers(held) and len(times) == len(held)  # type: ignore[arg-type]


def well_formed_reply(reply: dict) -> bool:
    """Whether a timing reply is what the worker writes: `well_formed_times`, and its other numbers the judge reads
    (`launch_ms`, `launch_p90_ms`: absent or finite and not negative; `capped`: absent or a count; `events_ms`:
    absent or a list of finite numbers). Anything else was written by other code in the process (a word where the
    judge reads a number would end the verification with the judge's own error): `tampered`, or for the reference
    its task is broken."""

    def number(x: object) -> bool:
        return type(x) in (int, float) and math.isfinite(x) and x >= 0  # type: ignore[operator]

    extras_ok = (
        all(reply.get(k) is None or number(reply.get(k)) for k in ("launch_ms", "launch_p90_ms"))
        and (reply.get("capped") is None or (type(reply.get("capped")) is int and reply["capped"] >= 0))
        and (reply.get("events_ms") is None or well_formed_times(reply["events_ms"], reply["events_ms"]))
    )
    return extras_ok and well_formed_times(reply.get("times_ms"), reply.get("held_ms"))


def escaped_work(sides: dict) -> str:
    """Why the candidate's event times miss work it left running past its timed stream ('' when they do not).

    Event timing on the current stream (KernelBench's, the kernelbench profile) sees only what that stream waits
    for: a kernel launched on a private stream that is never joined back finishes after the end event, and the call
    is credited with its launch alone. Every timed call also runs a device-wide synchronise and reads the host clock
    (worker/timing.py), so each side reports a host-bounded time beside the event time (`held`). Work left on another
    stream shows as a gap between the two; the reference's own gap (sync latency, host noise) is what an honest
    call shows. A candidate whose median gap exceeds the reference's by more than the largest of ESCAPE_FLOOR_MS, the
    reference's own gap and ESCAPE_SHARE of its held time did not earn its event-timed speedup (H200: a GELU launched
    on an unjoined stream was credited 2.0x by the events on 2026-12-02; on 2026-12-03 its gap was 0.245 ms a call
    against the reference's 0.030 ms)."""
    gaps = {}
    for side in ("ref", "cand"):
        times, held = sides[side]["times"], sides[side].get("held", [])
        if not times or len(held) != len(times):
            return ""  # no held times (an older worker or a CPU run): nothing to compare
        gaps[side] = float(np.median(np.subtract(held, times)))
    limit = max(ESCAPE_FLOOR_MS, gaps["ref"], ESCAPE_SHARE * float(np.median(sides["cand"]["held"])))
    excess = gaps["cand"] - gaps["ref"]
    if excess <= limit:
        return ""
    return (
        f"{ESCAPED}: {gaps['cand']:.4f} ms a call ran after its end event "
        f"(the reference's {gaps['ref']:.4f} ms), work left on another stream that the event times miss"
    )


def retime_reason(checked: Verdict | tuple, sides: dict, confirming: bool) -> tuple[str, float]:
    """(why a timing is taken once more by `timing_stage.clock_again`, the most the second may be charged a call), or
    ('', inf): a clock correction (charged at most the first timing's excess), work seen outliving the timed stream
    (`escaped_work`), or a reference slower beside the candidate than alone (`sabotage`). Work a candidate hides or
    leaves on the GPU shows in every timing; host load often stretches one only: in the H100 panel at e2fe471
    (2026-12-05) an honest 49 us Triton GELU in a loaded pool was refused for 30.8 us a call past its end events
    against the reference's 10.4 us, where its other runs showed none; in the miniature's run of 2026-12-06 a correct
    sample was `tampered` for a 19 us launch-bound reference at 0.0878 ms a call beside it (0.0190 ms alone) while
    seven other judges compiled on the same cores. The second timing is judged on its own, so a candidate gains
    nothing by behaving in one of them only. Not in a confirming run."""
    if confirming:
        return "", math.inf
    if isinstance(checked, Verdict):
        escaped = checked.status == "unconfirmed_speedup" and checked.message.startswith(ESCAPED)
        slowed = checked.status == "tampered" and checked.message.startswith(SLOWED)
        return (f"refused ({checked.message})", math.inf) if escaped or slowed else ("", math.inf)
    return (checked[4], check_clock(sides)[0]) if checked[4].startswith("corrected") else ("", math.inf)


def _median_speedup(sides: dict) -> float:
    cand = float(np.median(sides["cand"]["times"]))
    return float(np.median(sides["ref"]["times"])) / cand if cand > 0 else math.inf


def replay_suspected(recurring: dict, fresh: dict) -> tuple[bool, str]:
    """(whether the candidate gains more than RECUR_TOLERANCE from a recurring input set than on fresh ones, what
    was measured), from the per-side times of both timings."""
    once, again = _median_speedup(recurring), _median_speedup(fresh)
    said = f"median speedup {once:.2f}x on the recurring input set, {again:.2f}x on fresh sets"
    if once > RECUR_TOLERANCE * again:
        return True, f"{said}: a result kept from an earlier call on the same input is replayed"
    return False, said


def replay_gain_ms(recurring: dict, fresh: dict) -> float:
    """Per call, ms the candidate saved on the recurring set beyond its fresh-set speedup: the time that speedup
    predicts there (the reference's recurring-set median over it) less the candidate's recurring-set median. A
    replay saves the candidate's whole work; on the H200 (2026-12-04) honest answers of the miniature's launch-bound
    tasks (4-12 us a call) crossed RECUR_TOLERANCE in both rounds with gains of 2-6 us."""
    cand = float(np.median(recurring["cand"]["times"]))
    again = _median_speedup(fresh)
    if not math.isfinite(again) or again <= 0:
        return 0.0
    return float(np.median(recurring["ref"]["times"])) / again - cand


def replay_noise(recurring: dict, fresh: dict, said: str) -> str:
    """'' when a second round that crossed RECUR_TOLERANCE is a replay; else the note for a gain within
    RECUR_FLOOR_MS a call, or on a launch-bound call (either side's fresh-set median under LAUNCH_BOUND_MS: on the
    H200, 2026-12-04, an honest 13 us answer crossed it in both rounds at 1.35x against 0.65x), whose fresh-set
    speedup is then the one credited, so that a replay there gains nothing either."""
    gain = replay_gain_ms(recurring, fresh)
    bound = min(float(np.median(fresh[side]["times"])) for side in ("ref", "cand")) < LAUNCH_BOUND_MS
    if gain > RECUR_FLOOR_MS and not bound:
        return ""
    return (
        f"{said.split(': a result')[0]}: {gain * 1e3:.1f} us a call gained, within a launch-bound call's noise "
        f"(the speedup is the fresh sets')"
    )


HOLD_STEPS_US = (0.0, 100.0, 200.0, 400.0, 800.0, 1500.0)  # the GPU hold's least lengths a block may get
HOLD_MARGIN = 1.25  # the hold lasts at least this many times the longer host launch path of the two sides


def next_hold_us(current: float, extras: list[dict]) -> float:
    """The GPU hold's least length for the next block (worker/hold.py): the first of HOLD_STEPS_US at least
    HOLD_MARGIN times the longer host launch path per call that either side reported (`launch_ms`), never shorter
    than `current`. Both sides get the same hold, so in the judge's clock each call costs the longer of the flush and
    the hold, plus its kernel, on both sides: neither side's launch path shows in the overheads `check_clock`
    compares. A side that reports a longer path than it has only lengthens both sides' holds (at most the last step)."""
    launch = max((float(e.get("launch_ms") or 0.0) for e in extras if isinstance(e, dict)), default=0.0)
    need = HOLD_MARGIN * launch * 1e3 if math.isfinite(launch) else HOLD_STEPS_US[-1]
    step = next((s for s in HOLD_STEPS_US if s >= need), HOLD_STEPS_US[-1])
    return max(current, step)


def same_hold(sides: dict) -> dict:
    """`sides` with only the overheads of blocks timed at the last block's hold length (when there are two or
    more): a block at a shorter hold may carry one side's launch path in its overhead (see `next_hold_us`)."""
    for side in sides.values():
        last = side["holds"][-1] if side.get("holds") else None
        keep = [h == last for h in side.get("holds", [])]
        if len(keep) == len(side["overheads"]) and sum(keep) >= 2:  # fewer leave no noise estimate: keep all then
            for key in ("overheads", "capped"):
                if len(side.get(key) or []) == len(keep):
                    side[key] = [x for x, k in zip(side[key], keep, strict=True) if k]
    return sides


def hold_notes(judge, side: str, extra: dict, block: tuple | None = None) -> None:
    """A note (once per side) when a side was timed without the GPU hold, or some of its holds hit their cap; with
    `block` ((index, hold_us, judge's ms, reported ms, untimed calls)), its record where KZ_BLOCK_TRACE asks."""
    block_trace.write(str(getattr(getattr(judge, "task", None), "name", "")), side, extra, block)
    name = {"ref": "the reference", "cand": "the candidate"}[side]
    protocol = str(extra.get("protocol") or "")
    notes = []
    if protocol.startswith("synced"):
        notes.append(f"{name} was timed with a synchronise before each call (no GPU hold here: {protocol[8:-1]})")
    if extra.get("capped"):
        notes.append(
            f"some of {name}'s calls hit the GPU hold's cap: a forward that synchronises the device, or takes over "
            "2 ms on the host, is timed with its host time in it"
        )
    for note in notes:
        if note not in judge.notes:
            judge.notes.append(note)


def record_split(judge, sides: dict, hold_us: float) -> None:
    """Where a timed call's reported time went, per side, in the verdict's `stage_seconds` (milliseconds, medians
    over the timed calls, as the worker reported them): `call_event_ms_<side>` the event interval,
    `call_outlive_ms_<side>` the host-measured rest (`held_ms` minus it), `call_launch_ms_<side>` the host's launch
    path (median over blocks), `call_launch_p90_ms_<side>` its 90th percentile in a block (median over blocks: a
    path longer than the hold shows in the block's overhead), `call_hold_us` the GPU hold's last least length, and
    `block_stage_ms_<side>` the median of a block's stage (its sets taken to the device) in the judge's clock, with
    `block_stage_excess_ms` the candidate's over the reference's, paired by block (median): what a stage delayed on
    purpose would show (docs/threat_model_coverage.md A18), recorded, not yet judged."""
    for side, got in sides.items():
        events, held = got.get("events") or [], got.get("held") or []
        if not events or len(events) != len(held):
            continue
        judge.stage_s[f"call_event_ms_{side}"] = round(statistics.median(events), 6)
        judge.stage_s[f"call_outlive_ms_{side}"] = round(statistics.median(h - e for h, e in zip(held, events)), 6)
        judge.stage_s[f"call_launch_ms_{side}"] = round(statistics.median(got.get("launch") or [0.0]), 6)
        judge.stage_s[f"call_launch_p90_ms_{side}"] = round(statistics.median(got.get("tail") or [0.0]), 6)
    judge.stage_s["call_hold_us"] = float(hold_us)
    stages = [[float(x) for x in sides[side].get("stage") or []] for side in ("ref", "cand")]
    if stages[0] and len(stages[0]) == len(stages[1]):
        for side, got in zip(("ref", "cand"), stages, strict=True):
            judge.stage_s[f"block_stage_ms_{side}"] = round(statistics.median(got), 6)
        judge.stage_s["block_stage_excess_ms"] = round(statistics.median(c - r for r, c in zip(*stages)), 6)
