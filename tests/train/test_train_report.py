"""The Coder run's report reads training tasks drawn again as a paired comparison with themselves."""

from __future__ import annotations

import json

import pytest

from kernelzero.train.report import first_draw_curve, redrawn_gain, write_train_report


def test_tasks_drawn_again_compare_first_and_latest_draw_paired():
    steps = [
        {"step": 1, "per_task": {"a": 0.0, "b": 0.5}},
        {"step": 2, "per_task": {"c": 1.0}},
        {"step": 3, "per_task": {"a": 0.5, "d": 0.0}},
        {"step": 4, "batch_step": 3},  # a reused batch's update: no reward statistics
        {"step": 5, "per_task": {"a": 1.0, "b": 0.25}},
    ]
    got = redrawn_gain(steps)
    # a: 0.0 first, 1.0 latest; b: 0.5 first, 0.25 latest; c and d drawn once
    assert got["tasks"] == 2
    assert (got["before"], got["after"], got["gain"]) == pytest.approx((0.25, 0.625, 0.375))
    assert redrawn_gain(steps[:2]) is None  # no task drawn twice
    assert redrawn_gain([{"step": 1}, {"step": 2}]) is None  # lines from before per_task


def test_the_report_says_how_tasks_drawn_again_moved(tmp_path):
    lines = [
        {"step": 1, "correct_rate": 0.25, "per_task": {"a": 0.0, "b": 0.5}},
        {"step": 2, "correct_rate": 0.75, "per_task": {"a": 1.0, "b": 0.5}},
    ]
    (tmp_path / "steps.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    text = write_train_report(tmp_path).read_text()
    assert (
        "Training tasks drawn again (2): correct share 0.250 at the first draw, 0.750 at the latest, gain +0.500"
        in text
    )


def test_the_steps_table_shows_the_anchor_nll_where_logged(tmp_path):
    lines = [{"step": 1, "correct_rate": 0.5, "anchor_nll": 0.00238}, {"step": 2, "correct_rate": 0.5}]
    (tmp_path / "steps.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    rows = write_train_report(tmp_path).read_text().splitlines()
    assert any(r.startswith("| step |") and r.endswith("| anchor NLL |") for r in rows)
    assert any(r.startswith("| 1 |") and r.endswith("| 0.00238 |") for r in rows)
    assert any(r.startswith("| 2 |") and r.endswith("| n/a |") for r in rows)


def test_first_draws_form_an_unseen_task_curve_by_stretch_of_steps():
    steps = [
        {"step": 1, "per_task": {"a": 0.0, "b": 0.5}},
        {"step": 2, "batch_step": 1},  # a reused batch's update
        {"step": 3, "per_task": {"a": 1.0, "c": 1.0}},  # a drawn again: not a first draw
        {"step": 5, "per_task": {"d": 0.25}},
        {"step": 7, "per_task": {"a": 1.0, "b": 1.0}},  # nothing new
    ]
    got = first_draw_curve(steps, windows=2)
    assert [(r["steps"], r["tasks"]) for r in got] == [([1, 3], 3), ([5, 7], 1)]  # a at step 3 is not new
    got = first_draw_curve(steps, windows=4)  # step 7's stretch has no first draw and is left out
    assert [(r["steps"], r["tasks"]) for r in got] == [([1, 1], 2), ([3, 3], 1), ([5, 5], 1)]
    assert [r["correct"] for r in got] == pytest.approx([0.25, 1.0, 0.25])
    low, high = got[0]["ci"]
    assert 0.0 <= low <= 0.25 <= high <= 0.5
    assert first_draw_curve([{"step": 1}]) == []
    with pytest.raises(ValueError, match="windows"):
        first_draw_curve(steps, windows=0)


def test_the_report_shows_the_first_draw_curve(tmp_path):
    lines = [{"step": 1, "correct_rate": 0.25, "per_task": {"a": 0.0, "b": 0.5}}]
    (tmp_path / "steps.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    text = write_train_report(tmp_path).read_text()
    assert "- steps 1-1: 0.250 [0.000, 0.500] over 2 tasks" in text
