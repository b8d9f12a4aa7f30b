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


def test_step_rows_show_each_proposer_step_and_coder_batch(tmp_path):
    proposer = {"step": 1, "proposals": 4, "admitted": 2, "success_hist": {"0.50": 1, "0.00": 1}}
    proposer |= {"reasons": {"no_code": 2}, "reward_mean": -0.25, "groups_with_signal": 1}
    proposer |= {"try_statuses": {"correct": 4, "format_error": 12}}
    _write(tmp_path / "round-1" / "proposer" / "steps.jsonl", [proposer])
    coder = [
        {"step": 1, "batch_step": 1, "samples": 8, "correct_rate": 0.0, "statuses": {"format_error": 8}},
        {"step": 2, "batch_step": 1, "held": True},
        {"step": 3, "batch_step": 3, "samples": 8, "correct_rate": 0.5, "statuses": {"correct": 4, "mismatch": 4}},
    ]
    coder[0] |= {"reward_mean": 0.0, "groups_with_signal": 0}
    coder[2] |= {"reward_mean": 0.4, "groups_with_signal": 2}
    _write(tmp_path / "round-1" / "coder" / "steps.jsonl", coder)
    lines = coevolve_times.step_rows(tmp_path)
    expected = "0.50 1, 0.00 1; rejected: no_code 2; tries: format_error 12, correct 4"
    assert lines[2] == f"| round-1 Proposer | 1 | 4 | 2 | {expected} | -0.250 | 1 |"
    assert lines[3] == "| round-1 Coder | 1 | 8 | 0.000 | format_error 8 | 0.000 | 0 (held) |"
    assert lines[4] == "| round-1 Coder | 3 | 8 | 0.500 | correct 4, mismatch 4 | 0.400 | 2 |"
