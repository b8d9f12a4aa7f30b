"""GRPO's time budget stops before a step would run past it, not one step after (a device call has no room)."""

from __future__ import annotations

from transformers import TrainerControl

from kernelzero.train.logs import TimeBudget


def run_steps(budget: TimeBudget, durations: list[float] | list[tuple[float, ...]]) -> int:
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


def batches(n: int, generate: float, update: float, per_batch: int) -> list[float]:
    """Step durations of `n` batches: a generating step, then per_batch - 1 update-only steps."""
    return ([generate] + [update] * (per_batch - 1)) * n


def test_reused_batches_stop_only_between_batches():
    # 4 updates a batch: a 40 s generating step and three 2 s updates, 46 s a batch; 6 batches (276 s) fit in 300 s
    # and a seventh would end at 322 s: it stops after step 24, a whole number of batches
    assert run_steps(TimeBudget(5.0, per_batch=4), batches(10, 40.0, 2.0, 4)) == 24
    # with one update a batch the same budget would stop inside the sixth batch's updates
    assert run_steps(TimeBudget(5.0), batches(10, 40.0, 2.0, 4)) % 4 != 0
    # a batch longer than the budget left stops at the first boundary, never inside a batch
    assert run_steps(TimeBudget(1.0, per_batch=4), batches(10, 50.0, 5.0, 4)) == 4


def test_the_first_batch_starts_the_judges_cold_and_sets_the_estimate_only_until_a_second_has_run():
    # H100, 2026-12-07: a call's first batch 73-85 s, the later ones 45-64 s. Here 80 s, then 50 s, updates 2 s each:
    # 330 s hold five batches (86 + 4 x 56 = 310); judged by the first, the fifth (ending at 310 s) would not start
    cold = [80.0, 2.0, 2.0, 2.0] + batches(9, 50.0, 2.0, 4)
    assert run_steps(TimeBudget(5.5, per_batch=4), cold) == 20
    # a later batch longer than the first counts in full: 80 s, then 120 s batches, stops after two (212 + 126 > 330,
    # where the first's 86 s would have started a third)
    slow = [80.0, 2.0, 2.0, 2.0] + batches(9, 120.0, 2.0, 4)
    assert run_steps(TimeBudget(5.5, per_batch=4), slow) == 8
    # with one batch only, the first is all there is to go by: 200 s first, budget 300 s, stops at once
    assert run_steps(TimeBudget(5.0, per_batch=4), [200.0, 1.0, 1.0, 1.0] + batches(4, 10.0, 1.0, 4)) == 4
