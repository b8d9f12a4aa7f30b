"""KernelEnv with a verdict that is not the candidate's: `step_many` over a batch holding a real broken task (its
reference raises on import) gives every episode a verdict, and the scores skip it (env/scoring.py)."""

from __future__ import annotations

from dataclasses import replace

from env_helpers import make_verdict

from kernelzero.env import KernelEnv
from kernelzero.env.scoring import best_turn, group_rewards

NO_KERNEL = (
    "```python\nimport torch.nn as nn\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return x\n```"
)


def test_step_many_gives_a_broken_tasks_episode_its_verdict_and_steps_the_others(gelu_task, good, pool_verifier):
    broken = replace(gelu_task, name="broken", source="raise RuntimeError('this reference cannot be imported')\n")
    env = KernelEnv(backend="triton", max_turns=2, reward="ca_grpo", verifier=pool_verifier)
    episodes = [env.reset(gelu_task), env.reset(broken), env.reset(gelu_task)]
    results = env.step_many(episodes, [NO_KERNEL, good, NO_KERNEL])
    assert [r.verdict.status for r in results] == ["no_kernel", "task_broken", "no_kernel"]
    skipped = results[1]
    assert skipped.reward == 0.0 and not skipped.done  # a turn's reward is a number; the episode goes on
    assert "Not your fault" in skipped.observation and "the task itself is broken" in skipped.observation
    assert env.score(episodes[1]) is None and env.score(episodes[0]) == 0.0
    assert env.samples_used == 3


def test_scores_rank_a_skipped_turn_last_and_give_its_episode_no_reward():
    infra, wrong, right = make_verdict("infra_error"), make_verdict("mismatch"), make_verdict("correct", speedup=2.0)
    assert best_turn([infra, wrong]) == 1  # a real verdict before a skipped one
    # judged: correct 2x and mismatch -> gate open (1/2), S = log2(2)/log2(4) = 0.5 with the default cap 4
    assert group_rewards([right, infra, wrong, make_verdict("task_broken")], "ca_grpo") == [1.05, None, 0.0, None]
    assert group_rewards([right, infra], "correctness") == [1.0, None]
