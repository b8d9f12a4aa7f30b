"""bench/block_trace_report.py: a KZ_BLOCK_TRACE file taken apart per block and side, the timings of one judge told
apart, records whose lists do not line up left out."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import block_trace_report  # noqa: E402


def record(block: int, side: str, judge_ms: float, **over) -> dict:
    rec = {"task": "t", "pid": 7, "block": block, "side": side, "hold_us": 200.0, "judge_ms": judge_ms,
           "times_ms": [0.13], "untimed": 2, "stage_ms": 2.0, "kinds": ["warm", "timed", "audit"],
           "events_ms": [0.15, 0.13, 0.12], "spent_ms": [0.05, 0.3, 0.9], "outlive_ms": [0.01]}  # fmt: skip
    return rec | over


def test_a_block_splits_into_events_holds_and_the_rest():
    got = block_trace_report.split(record(0, "cand", 3.0))
    assert got["events"] == pytest.approx(0.40)
    # warm-up 0.2 (its hold), timed 0.3 (a launch path past the 0.2 ms hold), audit 1.5 (AUDIT_HOLD_US)
    assert got["holds"] == pytest.approx(0.2 + 0.3 + 1.5) and got["launch_over_hold"] == pytest.approx(0.1)
    assert got["rest"] == pytest.approx(3.0 - 0.40 - 2.0)
    assert got["overhead"] == pytest.approx(3.0 - 0.13 - 2 * 0.13)
    assert got["untimed_gap"] == pytest.approx(0.15 + 0.12 - 2 * 0.13)
    assert block_trace_report.split(record(0, "cand", 3.0, events_ms=[0.1, None, 0.1])) is None  # a forged list
    assert block_trace_report.split(record(0, "cand", 3.0, kinds=["timed"])) is None  # lists that do not line up


def test_the_workers_phases_split_the_block_and_the_rest_is_outside_the_worker():
    got = block_trace_report.split(record(0, "cand", 3.0, phases_ms=[0.1, 2.2, 0.3]))
    assert (got["w_begin"], got["w_calls"], got["w_end"]) == (0.1, 2.2, 0.3)
    assert got["outside"] == pytest.approx(3.0 - 2.6)
    assert got["w_host"] == pytest.approx(2.2 - 0.40 - 2.0)  # the hand-off less the events and the holds
    old = block_trace_report.split(record(0, "cand", 3.0))  # a trace from before the phases: nan, not a failure
    assert (
        math.isnan(old["w_begin"])
        and math.isnan(old["w_host"])
        and math.isnan(old["outside"])
        and old["rest"] == pytest.approx(0.6)
    )


def test_each_timing_of_a_judge_is_kept_apart(tmp_path):
    lines = [record(b, side, 3.0 + (0.3 if side == "cand" else 0.0)) for _ in range(2) for b in range(3)
             for side in ("ref", "cand")]  # fmt: skip
    lines.append(record(0, "ref", 9.0, task="other"))
    path = tmp_path / "blocks.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in lines))
    timings = block_trace_report.blocks(path, "t")
    assert sorted(timings) == [("t", 7, 0), ("t", 7, 1)]
    for timing in timings.values():
        assert sorted(timing) == [0, 1, 2]
        assert all(b["cand"]["rest"] - b["ref"]["rest"] == pytest.approx(0.3) for b in timing.values())


def test_each_kind_of_call_is_summed_up_per_side():
    timing = {b: {"cand": block_trace_report.split(record(b, "cand", 3.0))} for b in range(3)}
    assert block_trace_report.by_kind(timing, "audit", "cand") == "0.1200 / 0.9000"
    assert block_trace_report.by_kind(timing, "warm", "cand") == "0.1500 / 0.0500"
    assert block_trace_report.by_kind(timing, "timed", "ref") == "-"  # no reference record in these blocks
