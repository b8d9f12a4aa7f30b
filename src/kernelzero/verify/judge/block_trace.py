"""A per-block record of the interleaved timing, for finding where a block's time in the judge's clock goes:
`KZ_BLOCK_TRACE=PATH` appends one JSON line per block and side to PATH. Off (the default), nothing is written.

Why: `timing_checks.check_clock` compares the two sides' block overheads (the judge's clock for a block less the
reported times, the untimed calls counted at the median). With one timed call a block (input sets of 64 MB and
more: `timing_stage.BLOCK_BYTES`), a block's fixed cost lands on one call; on the H100 at e2fe471 (bench/verify.md,
nineteenth session) an honest 0.13 ms Triton reduction's blocks ran a median 0.13-0.46 ms over the reference's in
every run, and one loaded run was corrected for it. Its verdict records medians only. This record keeps every call:
its kind (`warm`, `timed`, `audit`), its event interval, its host launch path and the block's outlive, beside the
judge's clock for the block, so the block's wall can be taken apart per side: GPU time of the untimed calls against
the median they are counted at, launch paths longer than the hold, and the rest (hand-off, settle, reply).

What it is not: a check. The per-call lists come from the side's own process (the candidate's may say anything), so
they are cleaned (numbers only, at most MAX_CALLS a list) and written as a record; no verdict reads them.
"""

from __future__ import annotations

import json
import math
import os

ENV = "KZ_BLOCK_TRACE"
MAX_CALLS = 512  # numbers kept per list: a block holds at most MAX_CALLS timed calls plus warm-ups and audits
KINDS = ("warm", "timed", "audit")


def _numbers(values: object) -> list[float | None]:
    """A list of finite numbers (anything else None), at most MAX_CALLS long."""
    if not isinstance(values, list):
        return []
    return [float(v) if type(v) in (int, float) and math.isfinite(v) else None for v in values[:MAX_CALLS]]


def block_record(task: str, side: str, extra: dict, block: tuple) -> dict:
    """One side's line for one block: `block` is (index, hold_us, judge_ms, timed calls' reported ms, untimed)."""
    index, hold_us, judge_ms, times, untimed = block
    calls = extra.get("calls_trace") if isinstance(extra.get("calls_trace"), dict) else {}
    kinds = calls.get("kinds") if isinstance(calls.get("kinds"), list) else []
    return {
        "task": task,
        "pid": os.getpid(),
        "block": index,
        "side": side,
        "hold_us": hold_us,
        "judge_ms": judge_ms,
        "times_ms": _numbers(list(times)),
        "untimed": untimed,
        "stage_ms": extra.get("stage_ms"),
        "kinds": [k if k in KINDS else "?" for k in kinds[:MAX_CALLS]],
        "events_ms": _numbers(calls.get("events_ms")),
        "spent_ms": _numbers(calls.get("spent_ms")),
        "outlive_ms": _numbers(calls.get("outlive_ms")),
        "phases_ms": _numbers(calls.get("phases_ms"))[:3],  # the worker's begin, calls, end (timed_block.calls_record)
    }


def write(task: str, side: str, extra: dict, block: tuple | None) -> bool:
    """Append the block's record where KZ_BLOCK_TRACE points; whether a line was written (never raises: a record
    that cannot be written is not the verification's failure)."""
    path = os.environ.get(ENV, "").strip()
    if not path or block is None:
        return False
    try:
        line = json.dumps(block_record(task, side, extra, block), allow_nan=False) + "\n"
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode())  # one write per line: lines of judges appending at once do not interleave
        finally:
            os.close(fd)
    except (OSError, ValueError, TypeError):
        return False
    return True
