"""verl's custom reward function: `compute_score` verifies each sample and returns c_i and S_i beside the score.

In a file verl loads (`reward.custom_reward_function.path=kz_reward.py`, `...name=compute_score`):

    from kernelzero.env import Verifier
    from kernelzero.env.adapters.verl import VerlReward
    compute_score = VerlReward(Verifier.http("http://gpu-host:8765"), backend="triton", reward="correctness")

verl calls `compute_score(data_source, solution_str, ground_truth, extra_info)` once per sample (the reward-loop
managers) and, with the legacy `batch` manager, `compute_score(data_sources=..., solution_strs=...,
ground_truths=..., extra_infos=...)` once per batch, which this object verifies in one batch. `ground_truth` is
the task as JSON (`adapters.common.task_label`) or a task name of `tasks`. It returns a dict: `score` (the
environment's turn reward: c_i for `correctness` and `ca_grpo`, c_i * speedup for `speedup`), and `correct`,
`speedup_score` (S_i), `speedup`, `status`, which verl logs and keeps in `non_tensor_batch`.

CA-GRPO's gate needs the group (all samples of one prompt, verl's `uid`), which a per-sample score cannot see:
register an advantage estimator that first turns the group's (c_i, S_i) into rewards with `ca_grpo_scores`, then
normalises as GRPO does (README, "The kernel environment and RL-engine adapters", shows the estimator).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

from kernelzero.env.adapters.common import SampleScorer


class VerlReward(SampleScorer):
    """A verl `compute_score` (per sample or per batch) backed by a kernelzero `Verifier` (`SampleScorer(verifier,
    backend, reward, tasks)`)."""

    __name__ = "compute_score"

    def score_many(self, solutions: Sequence[str], ground_truths: Sequence[Any]) -> list[dict[str, Any]]:
        """The score dicts of many samples, verified in one batch."""
        if len(solutions) != len(ground_truths):
            raise ValueError(f"{len(solutions)} solutions but {len(ground_truths)} ground truths")
        return self.score_texts(solutions, ground_truths)

    def __call__(
        self,
        data_source: str | None = None,
        solution_str: str | None = None,
        ground_truth: Any = None,
        extra_info: dict | None = None,
        *,
        data_sources: Sequence[str] | None = None,
        solution_strs: Sequence[str] | None = None,
        ground_truths: Sequence[Any] | None = None,
        extra_infos: Sequence[dict] | None = None,
        **kwargs: Any,
    ) -> dict[str, Any] | list[dict[str, Any]]:
        if solution_strs is not None:
            return self.score_many(solution_strs, ground_truths or [])
        if solution_str is None:
            raise ValueError("compute_score needs solution_str (one sample) or solution_strs (a batch)")
        return self.score_many([solution_str], [ground_truth])[0]


def ca_grpo_scores(
    correct: Sequence[float],
    speedup_scores: Sequence[float],
    index: Sequence[Hashable],
    alpha: float = 0.5,
    beta: float = 0.1,
) -> list[float]:
    """CA-GRPO rewards of a batch whose samples are grouped by `index` (verl's uid): `r_i = c_i (1 + T beta S_i)`.

    `speedup_scores` are the S_i that `compute_score` returned (already normalised); a group's gate T is open when
    its mean c_i >= alpha. The result replaces the per-sample scores before GRPO's group normalisation.

    >>> ca_grpo_scores([1, 1, 0, 0, 1, 0, 0, 0], [0.5, 0, 0, 0, 1.0, 0, 0, 0], ["a"] * 4 + ["b"] * 4)
    [1.05, 1.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0]
    """
    if not (len(correct) == len(speedup_scores) == len(index)):
        raise ValueError(f"{len(correct)} c_i, {len(speedup_scores)} S_i and {len(index)} group ids differ in length")
    groups: dict[Hashable, list[int]] = {}
    for i, uid in enumerate(index):
        groups.setdefault(uid, []).append(i)
    out = [0.0] * len(correct)
    for members in groups.values():
        cs = [correct[i] for i in members]
        gate = sum(cs) / len(cs) >= alpha - 1e-12
        for i in members:
            # rewards.ca_grpo_rewards takes raw speedups; S_i is already a score here, so the formula is applied directly.
            out[i] = float(correct[i]) * (1.0 + (beta if gate else 0.0) * float(speedup_scores[i]))
    return out


__all__ = ["VerlReward", "ca_grpo_scores"]
