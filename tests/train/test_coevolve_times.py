"""bench/coevolve_times.py sums each phase's steps; a Coder phase's update-only lines (a reused batch) carry no
batch statistics and count towards time, not towards the correct rate (they broke it on the H100, 2026-12-06)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import coevolve_times  # noqa: E402


def _write(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_rows_of_a_round_with_reused_batches(tmp_path):
    _write(
        tmp_path / "round-1" / "proposer" / "steps.jsonl",
        [{"proposals": 4, "admitted": 1, "time_generate_s": 1.0, "time_admit_s": 2.0, "time_step_s": 4.0}] * 2,
    )
    coder = [
        {"samples": 8, "correct_rate": 0.5, "time_generate_s": 3.0, "time_verify_s": 2.0, "time_step_s": 6.0},
        {"time_update_s": 1.0, "time_step_s": 1.0},
        {"samples": 8, "correct_rate": 0.25, "time_generate_s": 3.0, "time_verify_s": 2.0, "time_step_s": 6.0},
        {"time_update_s": 1.0, "time_step_s": 1.0},
    ]
    _write(tmp_path / "round-1" / "coder" / "steps.jsonl", coder)
    lines = coevolve_times.rows(tmp_path)
    assert lines[2] == "| round-1 Proposer | 2 | 2.0 | 0.0 | 4.0 | 0.0 | 0.0 | 8.0 | admitted 0.25 |"
    assert lines[3] == "| round-1 Coder | 4 | 6.0 | 0.0 | 0.0 | 4.0 | 2.0 | 14.0 | correct 0.38 |"
