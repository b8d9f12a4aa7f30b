"""Rewards skip samples whose verdict is not the candidate's (`infra_error`, `task_broken`): exact numbers for
CA-GRPO's rows, gate and step statistics, the Frontier Reward's p, and the Coder's GRPO reward end to end on a
real broken task (its reference raises on import) verified by the real local pool."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from kernelzero.rewards import (
    ca_grpo_from_verdicts,
    ca_grpo_rewards,
    gate_open,
    penalise_near_duplicates,
    success_rate,
)
from kernelzero.tasks import load_suite, resize, select
from kernelzero.train.config import RewardConfig, VerifierConfig
from kernelzero.train.logs import step_stats
from kernelzero.train.proposer_reward import solved_reward
from kernelzero.train.reward import CoderReward, group_rewards, is_skipped_row, verdict_row
from kernelzero.types import Verdict

KERNELS = Path(__file__).resolve().parents[1] / "kernels"
GELU = (KERNELS / "correct" / "triton_gelu.py").read_text()
NO_KERNEL = "import torch.nn as nn\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return x\n"


def _v(status: str, speedup: float | None = None) -> Verdict:
    strict = {} if status in ("infra_error", "task_broken") else {"strict": status}  # early verdicts have none
    return Verdict(status, "t", "h", "c", "triton", "default", "H200", "x", policy_status=strict, speedup_eager=speedup)


def test_ca_grpo_leaves_skipped_samples_out_of_the_gate_and_gives_them_none():
    # judged: correct 2x, mismatch -> mean c = 1/2 >= 0.5, gate open; S(2x) = log2(2)/log2(4) = 0.5
    group = [_v("correct", 2.0), _v("infra_error"), _v("mismatch"), _v("task_broken")]
    assert ca_grpo_from_verdicts(group) == [1.05, None, 0.0, None]
    # counted as wrong instead, the mean would be 1/4 and the gate shut: 1.0, not 1.05
    assert ca_grpo_rewards([1, 0, 0, 0], [2.0, None, None, None]) == [1.0, 0.0, 0.0, 0.0]
    assert ca_grpo_from_verdicts([_v("infra_error"), _v("task_broken")]) == [None, None]
    assert (gate_open([1, None, 0, None]), gate_open([None, None]), gate_open([None], gate=False)) == (
        True,
        False,
        True,
    )


def test_the_grpo_row_builder_keeps_a_skipped_status_and_the_group_gate_ignores_it():
    verdicts = [_v("correct", 2.0), _v("infra_error"), _v("mismatch"), _v("task_broken")]
    rows = [verdict_row("t", v, 10, "eager") for v in verdicts]
    assert rows == [
        ("t", 1, 2.0, "correct", 10),
        ("t", 0, None, "infra_error", 10),
        ("t", 0, None, "mismatch", 10),
        ("t", 0, None, "task_broken", 10),
    ]
    assert [is_skipped_row(r) for r in rows] == [False, True, False, True]
    rewards, gates = group_rewards(rows + [("u", 0, None, "infra_error", 4)] * 4, 4, RewardConfig())
    assert rewards == [1.05, None, 0.0, None, None, None, None, None] and gates == [True, False]
    stats = step_stats(rows, rewards[:4], gates[:1])
    assert (stats["samples"], stats["skipped"], stats["correct_rate"], stats["reward_mean"]) == (4, 2, 0.5, 0.525)
    assert stats["groups_with_signal"] == 1
    assert stats["per_task"] == {"t": 0.5}  # the judged rows only: 1 correct of 2


def test_the_frontier_reward_reads_p_over_the_solves_that_were_judged():
    solves = [_v("correct"), _v("infra_error"), _v("mismatch"), _v("mismatch"), _v("correct"), _v("task_broken")]
    assert success_rate(solves) == 0.5  # 2 of the 4 judged, not 2 of 6
    assert solved_reward(solves, "linear", -1.0) == (0.5, 1.0)
    assert solved_reward(solves, "unbiased", -1.0) == (0.5, 1.0)  # 4 * 0.25 * 4/3 clipped to 1
    assert solved_reward(solves[:4], "linear", -1.0) == pytest.approx((1 / 3, 2 / 3))
    # unbiased: N is the judged solves (8), not all 10: 4 * 1/8 * 7/8 * 8/7 = 0.5 (with N = 10 it would be 0.486...)
    eight = [_v("correct")] + [_v("mismatch")] * 7 + [_v("infra_error")] * 2
    assert solved_reward(eight, "unbiased", -1.0) == (0.125, 0.5)
    assert solved_reward([_v("infra_error"), _v("task_broken")], "linear", -1.0) == (None, None)  # no reward
    assert penalise_near_duplicates([1.0, None, 1.0], ["k", "k", "k"]) == [1.0, None, 0.5]


def test_the_coder_grpo_reward_gives_a_broken_tasks_samples_none_end_to_end():
    task = resize(select(load_suite("kz-basic").tasks, names=["level1/21_GELU"])[0], preset="smoke")
    broken = replace(task, name="broken", source="raise RuntimeError('this reference cannot be imported')\n")
    steps: list = []
    verifier = VerifierConfig(jobs=2, options={"device": "cpu", "compile_check": False, "trials": 1})
    reward = CoderReward({t.name: t for t in (task, broken)}, RewardConfig(), verifier, 2, on_step=steps.append)
    rewards = reward(prompts=[""] * 4, completions=[GELU, NO_KERNEL, GELU, GELU], task=[task.name] * 2 + ["broken"] * 2)
    assert rewards == [1.0, 0.0, None, None]  # gate: 1 of 2 judged correct; no timing on the CPU: S = 0
    rows = steps[0]["rows"]
    assert [r[3] for r in rows] == ["correct", "no_kernel", "task_broken", "task_broken"]
    assert steps[0]["gates"] == [True, False]


def test_the_gated_pass_asks_the_real_pool_for_fewer_trials_and_the_first_pass_for_all():
    """`trials` in `CoderReward.verify` (the gated timed pass asks RETIMED_TRIALS): the real local pool's verdict
    ran that many correctness trials, and the configured number otherwise."""
    task = resize(select(load_suite("kz-basic").tasks, names=["level1/21_GELU"])[0], preset="smoke")
    verifier = VerifierConfig(jobs=2, options={"device": "cpu", "compile_check": False, "trials": 3})
    reward = CoderReward({task.name: task}, RewardConfig(), verifier, 2)
    (full,) = reward.verify([task.name], [GELU], timed=False)
    (fewer,) = reward.verify([task.name], [GELU + "\n# again"], timed=False, trials=1)
    assert (full.status, full.trials, fewer.status, fewer.trials) == ("correct", 3, "correct", 1)
