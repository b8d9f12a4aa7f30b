"""GRPO's time budget stops before a step would run past it, not one step after (a device call has no room)."""

from __future__ import annotations

from transformers import TrainerControl

from kernelzero.train.logs import TimeBudget


def run_steps(budget: TimeBudget, durations: list[float]) -> int:
    """Steps the trainer would take with these step durations (seconds) before the budget stops it."""
    now = [0.0]
    budget.clock = lambda: now[0]
    budget.on_train_begin(None, None, TrainerControl())
    for k, d in enumerate(durations, 1):
        now[0] += d
        control = TrainerControl()
        budget.on_step_end(None, None, control)
        if control.should_training_stop:
            assert control.should_save  # stopped with a checkpoint
            return k
    return len(durations)


def test_stops_when_the_next_step_would_end_past_the_budget():
    # 5 minutes, 95 s steps: after 3 steps (285 s) a fourth would end at 380 s, so it stops at 3, not 4
    assert run_steps(TimeBudget(5.0), [95.0] * 10) == 3
    # a long first step sets the estimate: 200 s, then 60 s steps; 200 + 200 > 300 stops at once
    assert run_steps(TimeBudget(5.0), [200.0] + [60.0] * 10) == 1
    # short steps use the budget to the end: 30 s steps, 10 of them fit in 300 s
    assert run_steps(TimeBudget(5.0), [30.0] * 20) == 10


def test_no_budget_never_stops():
    assert run_steps(TimeBudget(None), [1000.0] * 5) == 5
