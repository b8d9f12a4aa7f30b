"""Take apart where each timing block's time in the judge's clock went, per side, from a KZ_BLOCK_TRACE file
(judge/block_trace.py): `python bench/block_trace_report.py blocks.jsonl [--task NAME]`.

Per block and side the judge's clock (`judge_ms`) splits into:
- `events`: the GPU time of every call the worker ran, timed, warm-up and audit (its event intervals);
- `holds`: per call the longer of the hold's least length (audits: at least AUDIT_HOLD_US) and the host's launch
  path (a launch path longer than the hold keeps the GPU waiting for it);
- `rest`: what is left (the hand-off to the runner thread, each call's settle and output copy, the reply).
Where the worker recorded its own clock (`phases_ms`, since 2026-12-05), also: `w_begin` (the hold's begin, with its
calibration unless `KZ_STAGE_CALIBRATE` staged it), `w_calls` (the hand-off that runs every call), `w_host` (that
hand-off less the events and the holds: the calls' host path no hold covered), `w_end` (the hold's end and the events
read) and `outside` (the judge's clock less the three: the command's and the reply's way and what the worker does
around the block); nan where a trace has no phases.
`overhead` is what `timing_checks.block_overhead` charges per timed call, and `untimed_gap` the part of it that comes
from counting the untimed calls at the timed calls' median instead of their own event time. The table gives the
median over blocks of each, per side, and of the candidate's excess over the reference in the same block.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from collections import defaultdict
from pathlib import Path

from kernelzero.verify.worker.timed_block import AUDIT_HOLD_US


def split(rec: dict) -> dict | None:
    """One side's block taken apart (ms), or None when its lists do not line up (a CPU block, a forged record)."""
    kinds, events, spent = rec["kinds"], rec["events_ms"], rec["spent_ms"]
    times = [t for t in rec["times_ms"] if t is not None]
    if not times or not (len(kinds) == len(events) == len(spent)) or None in events or None in spent:
        return None
    hold_ms = rec["hold_us"] / 1e3
    holds = sum(max(max(hold_ms, AUDIT_HOLD_US / 1e3) if k == "audit" else hold_ms, s) for k, s in zip(kinds, spent))
    median = statistics.median(times)
    untimed_events = sum(e for k, e in zip(kinds, events) if k != "timed")
    judge = rec["judge_ms"]
    phases = rec.get("phases_ms") or []
    if len(phases) != 3 or None in phases:
        phases = [math.nan] * 3
    return {
        "w_begin": phases[0],
        "w_calls": phases[1],
        "w_end": phases[2],
        "w_host": phases[1] - sum(events) - holds,
        "outside": judge - sum(phases),
        "judge": judge,
        "events": sum(events),
        "holds": holds,
        "rest": judge - sum(events) - holds,
        "overhead": (judge - sum(times) - rec["untimed"] * median) / len(times),
        "untimed_gap": (untimed_events - rec["untimed"] * median) / len(times),
        "launch_over_hold": sum(max(0.0, s - hold_ms) for k, s in zip(kinds, spent) if k != "audit"),
        "calls": len(kinds),
        # per kind of call: (event ms, launch path ms) of each, for the second table
        "by_kind": {
            k: [(e, s) for kk, e, s in zip(kinds, events, spent) if kk == k] for k in ("warm", "timed", "audit")
        },
    }


def blocks(path: Path, task: str | None) -> dict:
    """{(task, pid, timing number): {block: {side: split}}}: a timing's blocks run 0, 1, ...; a block index seen
    again for a side starts the next timing of that judge."""
    out: dict = defaultdict(lambda: defaultdict(dict))
    seen: dict = defaultdict(int)
    for line in path.read_text().splitlines():
        rec = json.loads(line)
        if task and rec["task"] != task:
            continue
        key = (rec["task"], rec["pid"])
        if rec["block"] == 0 and rec["side"] in out[(*key, seen[key])].get(0, {}):
            seen[key] += 1
        got = split(rec)
        if got is not None:
            out[(*key, seen[key])][rec["block"]][rec["side"]] = got
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("trace", type=Path)
    p.add_argument("--task", default=None)
    args = p.parse_args()
    fields = ("judge", "events", "holds", "rest", "overhead", "untimed_gap", "launch_over_hold")
    fields += ("w_begin", "w_calls", "w_host", "w_end", "outside")
    print("| task | timing | blocks | calls a block | " + " | ".join(f"{f} ref / cand / excess" for f in fields) + " |")
    print("|---|---|---|---|" + "---|" * len(fields))
    timings = sorted(blocks(args.trace, args.task).items())  # read once for both tables
    for (name, pid, n), timing in timings:
        pairs = [b for b in timing.values() if len(b) == 2]
        if not pairs:
            continue
        cells = []
        for f in fields:
            ref = statistics.median(b["ref"][f] for b in pairs)
            cand = statistics.median(b["cand"][f] for b in pairs)
            excess = statistics.median(b["cand"][f] - b["ref"][f] for b in pairs)
            cells.append(f"{ref:.3f} / {cand:.3f} / {excess:+.3f}")
        calls = statistics.median(b["cand"]["calls"] for b in pairs)
        print(f"| {name} | {pid}.{n} | {len(pairs)} | {calls:g} | " + " | ".join(cells) + " |")
    print("\nPer kind of call, medians over the blocks' calls: event ms / launch path ms, reference then candidate.\n")
    print("| task | timing | warm ref | warm cand | timed ref | timed cand | audit ref | audit cand |")
    print("|---|---|---|---|---|---|---|---|")
    for (name, pid, n), timing in timings:
        print(
            f"| {name} | {pid}.{n} | "
            + " | ".join(by_kind(timing, k, s) for k in KINDS for s in ("ref", "cand"))
            + " |"
        )


KINDS = ("warm", "timed", "audit")


def by_kind(timing: dict, kind: str, side: str) -> str:
    """'event / launch' medians (ms) of one kind of call on one side over a timing's blocks, or '-'."""
    calls = [c for b in timing.values() if side in b for c in b[side]["by_kind"].get(kind, [])]
    if not calls:
        return "-"
    return f"{statistics.median(e for e, _ in calls):.4f} / {statistics.median(s for _, s in calls):.4f}"


if __name__ == "__main__":
    main()
