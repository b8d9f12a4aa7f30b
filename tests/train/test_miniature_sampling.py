"""bench/miniature_sampling.py reads a split from the exported folder, or draws it from the config when absent."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import miniature_sampling as bench  # noqa: E402


def test_a_split_missing_from_the_folder_is_drawn_from_the_config_and_kept(tmp_path):
    (tmp_path / "tasks").mkdir()
    config = str(ROOT / "configs" / "tiny-cpu.yaml")
    tasks, solutions = bench.split_tasks(tmp_path, "sft", 2, config)
    assert len(tasks) == 2 and all(t.name in solutions for t in tasks)
    assert (tmp_path / "tasks" / "sft-sample2.jsonl").exists()
    again, _ = bench.split_tasks(tmp_path, "sft", 2, config)
    assert [t.name for t in again] == [t.name for t in tasks]  # the same seeded sample


def test_samples_must_match_the_temperatures():
    with pytest.raises(SystemExit):
        bench.main(["--temps", "0", "1", "--samples", "1"])
    with pytest.raises(SystemExit):
        bench.main(["--temps", "-1"])


def test_two_policies_pair_by_task():
    """--against: the tasks each policy solves alone and both, from greedy hits on the same tasks."""
    first = {"a": True, "b": True, "c": False, "d": True}
    second = {"a": False, "b": True, "c": True, "d": False}
    assert bench.paired(first, second) == {"first only": 2, "second only": 1, "both": 1}
    with pytest.raises(ValueError, match="different tasks"):
        bench.paired(first, {"a": True})
